"""End to end in a real browser: Debian's Chromium, driven by Playwright, against a
real ``stead serve`` process. A person logs in with a token, finds an agent waiting
on an approval, approves it for 15 minutes and watches it complete; denies another
and sees the refusal reach it. Screenshots of the agents list, a timeline and the
inbox (at a desktop's and a phone's width) are saved under ``.artifacts/``."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.needs import missing

from .conftest import WRITE, write_spec

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".artifacts" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


HOSTILE = {
    "text": "<script>window.pwned = 1</script> The ticket asks for it.",
    "actions": [{"tool": "write_file",
                 "args": {"path": "out.txt", "content": "<img src=x onerror='window.pwned=2'>"}}],
}  # fmt: skip
"""A decision whose words and arguments are markup: the inbox shows them as text."""


def _stead(*argv: str, env: dict[str, str]) -> Any:
    out = subprocess.run([sys.executable, "-m", "stead", *argv, "--json"], env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout)


class Site:
    def __init__(self, base: str, tokens: dict[str, str]) -> None:
        self.base, self.tokens = base, tokens

    def api(self, method: str, path: str, role: str = "operator", **kw: Any) -> Any:
        auth = {"authorization": f"Bearer {self.tokens[role]}"}
        got = httpx.request(method, self.base + path, timeout=10, headers=auth, **kw)
        assert got.status_code < 300, got.text
        return got.json() if got.content else None

    def waiting(self, spec: str) -> tuple[str, str]:
        agent_id = self.api("POST", "/v1/agents", json={"spec_file": spec})["agent_id"]
        self.api("POST", f"/v1/agents/{agent_id}/run")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            pending = [a for a in self.api("GET", "/v1/approvals") if a["agent_id"] == agent_id]
            if pending:
                return agent_id, pending[0]["approval_id"]
            time.sleep(0.1)
        pytest.fail(f"{agent_id} never asked for approval")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    if not Path(CHROMIUM).exists():
        missing("Debian's chromium is not installed", "apt-get install -y chromium")
    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "writer", [WRITE, {"finish": "wrote out.txt"}], autonomy="act_with_approval")
    write_spec(specs, "talker", [{"say": "Which file, <i>a</i> or b?"}, {"finish": "done"}])
    write_spec(
        specs,
        "hostile",
        [HOSTILE, {"finish": "done"}],
        autonomy="act_with_approval",
        goals=[{"id": "notes", "description": "out.txt <b>says</b> what the ticket asks"}],
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env |= {"PYTHONPATH": f"{REPO / 'src'}:{REPO}",
            "STEAD_STORE": f"sqlite:///{tmp_path / 'stead.db'}",
            "STEAD_SECRET_KEY": base64.b64encode(os.urandom(32)).decode()}  # fmt: skip
    tokens = {
        role: _stead("token", "create", "--tenant", "default", "--role", role, "--name",
                     f"Ana the {role}", env=env)["token"]
        for role in ("operator", "approver")
    }  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "stead", "serve", "--port", str(port), "--specs", str(specs)],
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
        yield Site(base, tokens)
    finally:
        server.terminate()
        server.communicate(timeout=20)


def test_a_person_approves_in_the_browser_and_watches_the_agent_complete(site: Site) -> None:
    from playwright.sync_api import expect, sync_playwright

    approved_agent, approval = site.waiting("writer.yaml")
    denied_agent, refusal = site.waiting("writer.yaml")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(site.base + "/login")
        page.fill("#token", site.tokens["approver"])
        page.click("button[type=submit]")
        expect(page.locator("table")).to_contain_text(approved_agent)
        expect(page.locator("text=2 approvals waiting")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "agents.png"), full_page=True)

        page.click("text=Approvals")
        card = page.locator(f"#{approval}")
        expect(card).to_contain_text("write_file")
        expect(card).to_contain_text("Agent writer")
        expect(card.locator("tr", has_text="content")).to_contain_text('"hello"')
        expect(card.locator(".diff")).to_contain_text("+hello")
        page.screenshot(path=str(ARTIFACTS / "inbox.png"), full_page=True)
        card.locator("select[name=valid_for]").select_option("15 minutes")
        card.locator("button.approve").click()
        expect(page.locator(".flash")).to_contain_text(f"Approved {approval}")

        other = page.locator(f"#{refusal}")
        other.locator("input[name=reason]").fill("not before the review")
        other.locator("button.deny").click()
        expect(page.locator(".flash")).to_contain_text(f"Denied {refusal}")
        expect(page.locator("text=No approval is waiting.")).to_be_visible()

        # the agent runs on (a worker would pick it up; here the operator asks the server)
        page.goto(f"{site.base}/agents/{approved_agent}")
        site.api("POST", f"/v1/agents/{approved_agent}/run")
        expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
        page.reload()
        timeline = page.locator("#timeline")
        expect(timeline).to_contain_text("approval granted")
        expect(timeline).to_contain_text("Ana the approver")
        expect(timeline).to_contain_text("files: out.txt")
        expect(page.locator("text=2 steps")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "timeline.png"), full_page=True)

        site.api("POST", f"/v1/agents/{denied_agent}/run")
        page.goto(f"{site.base}/agents/{denied_agent}")
        expect(page.locator("#timeline")).to_contain_text("not before the review",
                                                          timeout=20_000)  # fmt: skip

        phone = browser.new_page(viewport={"width": 390, "height": 844})
        phone.context.add_cookies(page.context.cookies())
        phone.goto(site.base + "/approvals")
        phone.goto(f"{site.base}/agents/{approved_agent}")
        wide = phone.evaluate("document.documentElement.scrollWidth")
        assert wide <= 390, f"the page is {wide} px wide on a 390 px phone"
        phone.screenshot(path=str(ARTIFACTS / "timeline-phone.png"), full_page=True)
        browser.close()
    events = site.api("GET", f"/v1/agents/{denied_agent}/events")["events"]
    assert any(e["kind"] == "approval_denied" for e in events)


def test_the_inbox_shows_the_models_markup_as_text(site: Site) -> None:
    """The model's words, an argument and the task hold markup: all of it is text on
    the page, none of it runs; and the card names the agent, its task, the model's
    reason, each argument's origin, the diff and how long it has waited."""
    from playwright.sync_api import expect, sync_playwright

    agent_id, approval = site.waiting("hostile.yaml")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(site.base + "/login")
        page.fill("#token", site.tokens["approver"])
        page.click("button[type=submit]")
        page.goto(site.base + "/approvals")
        card = page.locator(f"#{approval}")
        expect(card.locator(".who")).to_contain_text(f"Agent hostile {agent_id}")
        expect(card.locator(".task")).to_have_text("out.txt <b>says</b> what the ticket asks")
        expect(card.locator(".why")).to_have_text(HOSTILE["text"])
        expect(card.locator("tr", has_text="content")).to_contain_text(
            "<img src=x onerror='window.pwned=2'>"
        )
        expect(card.locator("tr", has_text="content")).to_contain_text("the model's own")
        expect(card.locator(".diff")).to_contain_text("+<img src=x onerror='window.pwned=2'>")
        expect(card.locator(".waited")).to_contain_text("valid while policy v0 is in force")
        assert card.locator("script, img, b").count() == 0
        assert page.evaluate("window.pwned") is None
        card.locator("button.approve").click()
        expect(page.locator(".flash")).to_have_text(f"Approved {approval}.")

        # a model's text answer is the agent speaking: its words are on its timeline
        talker = site.api("POST", "/v1/agents", json={"spec_file": "talker.yaml"})["agent_id"]
        site.api("POST", f"/v1/agents/{talker}/run")
        page.goto(f"{site.base}/agents/{talker}")
        expect(page.locator("#status")).to_have_text("waiting", timeout=20_000)
        page.reload()
        expect(page.locator("#timeline")).to_contain_text(
            "the agent says: Which file, <i>a</i> or b?"
        )
        assert page.locator("#timeline i").count() == 0
        browser.close()
