"""Each extra's feature, used as a user would from a fresh install of the wheel.

Run by .ci/check-package with the fresh environment's python, after it installed
``stead[EXTRA]``: ``python .ci/check_extras.py EXTRA WORKDIR [DEV_PYTHON]``. Each check
drives the installed ``stead`` command and looks at what it did from outside (the
collector's requests, the bucket's objects, the tools listed); it exits 1 saying what
was wrong. DEV_PYTHON is the project's dev environment, which runs moto's S3 server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BIN = Path(sys.executable).parent
STEAD = str(BIN / "stead")

SPEC = """name: extras-check
model: scripted:script.yaml
tools: [write_file]
"""
SCRIPT = """- {tool: write_file, args: {path: hello.txt, content: "hello from the package check"}}
- {finish: wrote hello.txt}
"""


def fail(message: str) -> None:
    print(f"check of an extra failed: {message}", file=sys.stderr)
    raise SystemExit(1)


def stead(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [STEAD, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=300,
    )
    if done.returncode != 0:
        fail(f"stead {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def agent_folder(work: Path, name: str) -> Path:
    folder = work / name
    folder.mkdir()
    (folder / "agent.yaml").write_text(SPEC, encoding="utf-8")
    (folder / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_otel(work: Path) -> None:
    """An agent's run is exported to an OTLP collector: its traces arrive."""
    seen: list[str] = []

    class Collector(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            seen.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    folder = agent_folder(work, "otel")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}"}
    stead("run", "agent.yaml", "--quiet", env=env, cwd=folder)
    server.shutdown()
    if "/v1/traces" not in seen:
        fail(f"no trace reached the collector; it was sent {seen}")


def check_s3(work: Path, dev_python: str) -> None:
    """An agent's workspace content is kept in an S3 bucket (moto's server)."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    creds = {"AWS_ACCESS_KEY_ID": "check", "AWS_SECRET_ACCESS_KEY": "check",
             "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
    os.environ.update(creds)
    log = (work / "moto.log").open("wb")
    moto = subprocess.Popen(
        [dev_python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="stead-check")
        folder = agent_folder(work, "s3")
        blobs = f"s3://stead-check/blobs?endpoint_url={endpoint}"
        stead("--blobs", blobs, "run", "agent.yaml", "--quiet", cwd=folder)
        listed = client.list_objects_v2(Bucket="stead-check", Prefix="blobs/")
        if not listed.get("KeyCount"):
            fail("the agent ran, but its workspace's content is not in the bucket")
    finally:
        moto.terminate()
        moto.wait(timeout=10)


def check_mcp(work: Path) -> None:
    """A spec's MCP server (mcp-server-time, from PyPI) starts and its tools are listed."""
    folder = agent_folder(work, "mcp")
    with (folder / "agent.yaml").open("a", encoding="utf-8") as spec:
        spec.write("mcp:\n  - {name: time, command: [mcp-server-time]}\n")
    listed = stead("--json", "mcp", "ls", "agent.yaml", cwd=folder)
    if "get_current_time" not in listed:
        fail(f"stead mcp ls did not list the time server's tools: {listed[:2000]}")


def check_inflight(work: Path) -> None:
    """stead work --in-flight runs an agent to its end."""
    folder = agent_folder(work, "inflight")
    store = f"sqlite:///{folder}/stead.db"
    out = subprocess.run(
        [STEAD, "--store", store, "run", "agent.yaml", "--max-steps", "1", "--quiet"],
        capture_output=True, text=True, cwd=folder, timeout=300,
    )  # fmt: skip
    if out.returncode not in (0, 3):
        fail(f"stead run --max-steps 1 exited {out.returncode}: {out.stderr[-2000:]}")
    stead("--store", store, "work", "--in-flight", "8", cwd=folder)
    agents = json.loads(stead("--store", store, "--json", "ls", cwd=folder))
    if [a["status"] for a in agents] != ["completed"]:
        fail(f"stead work --in-flight left the agent {agents}")


def main() -> None:
    extra, work = sys.argv[1], Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    if extra == "otel":
        check_otel(work)
    elif extra == "s3":
        check_s3(work, sys.argv[3])
    elif extra == "mcp":
        check_mcp(work)
    elif extra == "inflight":
        check_inflight(work)
    else:
        fail(f"no check for the extra {extra!r}")
    print(f"  [{extra}] works")


if __name__ == "__main__":
    main()
