"""Webhooks end to end: an admin adds one over the HTTP API of a real ``stead serve``;
an agent asks for approval; ``stead work`` (a process of its own) delivers the
notice, signed, to a receiver of ours on 127.0.0.1 (allowed by the operator's
``STEAD_WEBHOOK_ALLOW``); a viewer sees it delivered on the webhooks page in
Chromium, and cannot add one."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.needs import missing

from ..notify.receiver import receiver, verify
from .conftest import WRITE, write_spec
from .process import REPO, SOURCE, stead_serve
from .test_browser import ARTIFACTS, CHROMIUM, Site


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Site, dict[str, str]]]:
    if not Path(CHROMIUM).exists():
        missing("Debian's chromium is not installed", "apt-get install -y chromium")
    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "writer", [WRITE, {"finish": "wrote out.txt"}], autonomy="act_with_approval")
    extra = {"STEAD_SECRET_KEY": base64.b64encode(os.urandom(32)).decode(),
             "STEAD_WEBHOOK_ALLOW": "127.0.0.1"}  # fmt: skip
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    with stead_serve(store, "--specs", str(specs), "--workers", "0", extra=extra) as served:
        tokens = {
            role: served.token("default", role)[0] for role in ("viewer", "operator", "admin")
        }
        # what a `stead work` of its own is given: the same store, key and allowance
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
        env |= {"PYTHONPATH": os.pathsep.join([str(SOURCE), str(REPO)]), "STEAD_STORE": store,
                **extra}  # fmt: skip
        yield Site(served.base, tokens), env


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
