"""Webhooks end to end: an admin adds one over the HTTP API of a real ``stead serve``;
an agent asks for approval; ``stead work`` (a process of its own) delivers the
notice, signed, to a receiver of ours on 127.0.0.1 (allowed by the operator's
``STEAD_WEBHOOK_ALLOW``); a viewer sees it delivered on the webhooks page in
Chromium, and cannot add one."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.needs import missing

from ..notify.receiver import receiver, verify
from .conftest import WRITE, write_spec
from .test_browser import ARTIFACTS, CHROMIUM, REPO, Site, _stead


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Site, dict[str, str]]]:
    if not Path(CHROMIUM).exists():
        missing("Debian's chromium is not installed", "apt-get install -y chromium")
    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "writer", [WRITE, {"finish": "wrote out.txt"}], autonomy="act_with_approval")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env |= {"PYTHONPATH": f"{REPO / 'src'}:{REPO}",
            "STEAD_STORE": f"sqlite:///{tmp_path / 'stead.db'}",
            "STEAD_SECRET_KEY": base64.b64encode(os.urandom(32)).decode(),
            "STEAD_WEBHOOK_ALLOW": "127.0.0.1"}  # fmt: skip
    tokens = {
        role: _stead("token", "create", "--tenant", "default", "--role", role, "--name",
                     f"Ana the {role}", env=env)["token"]
        for role in ("viewer", "operator", "admin")
    }  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "stead", "serve", "--port", str(port), "--specs", str(specs),
         "--workers", "0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(base + "/v1/health", timeout=1)
            break
        except httpx.HTTPError:
            assert server.poll() is None and time.monotonic() < deadline, server.stderr
            time.sleep(0.1)
    try:
        yield Site(base, tokens), env
    finally:
        server.terminate()
        server.communicate(timeout=20)


def test_an_approval_is_told_to_the_webhook_and_shown_delivered(
    site: tuple[Site, dict[str, str]],
) -> None:
    from playwright.sync_api import expect, sync_playwright

    web, env = site
    with receiver([]) as box:
        refused = httpx.post(
            web.base + "/v1/webhooks",
            json={"url": box.url},
            timeout=10,
            headers={"authorization": f"Bearer {web.tokens['operator']}"},
        )
        assert refused.status_code == 403  # fmt: skip
        added = web.api("POST", "/v1/webhooks", "admin",
                        json={"url": box.url, "events": ["approval_requested"]})  # fmt: skip
        assert added["secret"].startswith("whsec_")
        listed = web.api("GET", "/v1/webhooks", "viewer")
        assert [h["hook_id"] for h in listed] == [added["hook_id"]]
        assert added["secret"] not in json.dumps(listed) and listed[0]["last"] is None
        agent_id, approval = web.waiting("writer.yaml")
        subprocess.run([sys.executable, "-m", "stead", "work"], env=env, check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        assert len(box.got) == 1
        got = box.got[0]
        assert verify(added["secret"], got.headers, got.body)
        body = json.loads(got.body)
        assert body["type"] == "approval.requested"
        assert body["data"]["agent_id"] == agent_id
        assert body["data"]["approval"]["approval_id"] == approval
        assert body["data"]["approval"]["tool"] == "write_file"
    history = web.api("GET", f"/v1/webhooks/{added['hook_id']}/deliveries", "viewer")
    assert history["deliveries"][0]["msg_id"] == got.headers["webhook-id"]
    assert history["deliveries"][0]["state"] == "delivered"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(web.base + "/login")
        page.fill("#token", web.tokens["viewer"])
        page.click("button[type=submit]")
        page.click("text=Webhooks")
        row = page.locator(f"tr[data-hook={added['hook_id']}]")
        expect(row).to_contain_text(box.url)
        expect(row.locator("td.last")).to_contain_text("delivered (200), 1 try")
        expect(row.locator("td.last")).to_contain_text("approval_requested")
        page.screenshot(path=str(ARTIFACTS / "webhooks.png"), full_page=True)
        browser.close()
    web.api("DELETE", f"/v1/webhooks/{added['hook_id']}", "admin")
    assert web.api("GET", "/v1/webhooks", "viewer") == []
