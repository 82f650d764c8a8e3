"""The proxy how-to's local checks, run as an operator would run them.

The page starts ``stead serve`` trusting 127.0.0.1 as its proxy, and plays the proxy
with curl: a login forwarded as HTTPS gets a ``Secure`` cookie, and a wrong token
forwarded for a client is logged against that client. The test runs the page on a
free port and checks both in the server's own answers.
"""

from __future__ import annotations

import json
import shutil

import httpx

import stead
from tests.needs import missing
from tests.server.process import free_port

from .tutorial import HOW_TO, Reader

PAGE = HOW_TO / "deploy-behind-a-proxy.md"


def test_deploy_behind_a_proxy(reader: Reader) -> None:
    if shutil.which("curl") is None:
        missing("curl is not installed", "apt-get install -y curl")
    port = free_port()
    reader.replace["8750"] = str(port)
    reader.follow(PAGE, timeout=60)

    probe = next(r for r in reader.ran if "/v1/health" in r.command)
    health = json.loads(probe.output)
    assert health == {"ok": True, "version": stead.__version__}
    base = f"http://127.0.0.1:{port}"
    assert httpx.get(f"{base}/v1/openapi.json", timeout=10).json()["openapi"].startswith("3.")
    token = reader.run("echo $TOKEN").output.strip()
    # without the proxy's header the cookie is not Secure: the header made it so
    plain = httpx.post(f"{base}/login", data={"token": token}, timeout=10)
    assert "secure" not in plain.headers["set-cookie"].lower()
    forwarded = httpx.post(f"{base}/login", data={"token": token}, timeout=10,
                           headers={"x-forwarded-proto": "https"})  # fmt: skip
    assert forwarded.headers["set-cookie"].endswith("Secure")
    log = json.loads(reader.run("stead --json token log").output)
    assert [(e["kind"], e["from"]) for e in log] == [("auth_failed", "203.0.113.7")]
