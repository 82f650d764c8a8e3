"""The path a new user takes, end to end, with nothing started but ``stead serve``.

A server over a fresh store; an admin makes an agent with a provider's model
(our fake OpenAI-compatible server on 127.0.0.1) over HTTP; the agent asks to
write a file; the approval is heard on a webhook (a receiver of our own,
signature checked); a person approves it in the page in Chromium while
another tab shows the agent's page; that tab sees it finish without a reload,
and the webhook hears of the completion.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx

from stead.sandbox.secrets import new_key
from tests.needs import missing
from tests.waiting import until

from ..models.fake_servers import FakeServer, Reply, openai_answer, openai_call
from ..notify.receiver import receiver, verify
from .process import stead_serve

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_a_new_user_hears_of_an_approval_approves_it_in_the_page_and_watches_it_finish(
    tmp_path: Path,
) -> None:
    if not Path(CHROMIUM).exists():
        missing("Debian's chromium is not installed", "apt-get install -y chromium")
    from playwright.sync_api import expect, sync_playwright

    env = {"STEAD_SECRET_KEY": new_key(), "STEAD_WEBHOOK_ALLOW": "127.0.0.1"}
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    with FakeServer() as model, receiver([]) as hook, stead_serve(store, extra=env) as s:
        model.queue(
            Reply(200, openai_answer([openai_call("c1", "write_file",
                                                  {"path": "note.txt", "content": "hello"})])),
            Reply(200, openai_answer([openai_call("c2", "finish", {"summary": "wrote it"})])),
        )  # fmt: skip
        admin, _ = s.token(role="admin")

        def api(method: str, path: str, **kw: Any) -> Any:
            got = httpx.request(method, s.base + path, timeout=30,
                                headers={"authorization": f"Bearer {admin}"}, **kw)  # fmt: skip
            assert got.status_code < 300, got.text
            return got.json() if got.content else None

        api(
            "PUT",
            "/v1/policy",
            json={"text": f'@model_base_url("{model.url}")\npermit(principal, action, resource);'},
        )
        api("PUT", "/v1/secrets/OPENAI_API_KEY", json={"value": "sk-x-123456", "to": ["127.0.0.1"]})
        secret = api("POST", "/v1/webhooks", json={
            "url": hook.url, "events": ["approval_requested", "completed"]})["secret"]  # fmt: skip
        agent_id = api("POST", "/v1/agents", json={"spec": {
            "name": "noter", "instructions": "Write note.txt saying hello, then finish.",
            "tools": ["write_file"], "autonomy": "act_with_approval",
            "model": {"provider": "openai", "name": "gpt-4o-mini", "base_url": model.url}}},
        )["agent_id"]  # fmt: skip

        # the approval is heard on the webhook, signed
        first = until(lambda: hook.got)[0]
        assert verify(secret, first.headers, first.body)
        said = json.loads(first.body)
        assert said["type"] == "approval.requested"
        assert said["data"]["agent_id"] == agent_id

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            context = browser.new_context()
            watching = context.new_page()
            watching.goto(s.base + "/login")
            watching.fill("#token", admin)
            watching.click("button[type=submit]")
            watching.goto(f"{s.base}/agents/{agent_id}")
            expect(watching.locator("#status")).to_have_text("waiting")

            inbox = context.new_page()
            inbox.goto(s.base + "/approvals")
            card = inbox.locator(".card", has_text="write_file").first
            expect(card).to_contain_text("noter")
            card.locator("button.approve").click()
            expect(inbox.locator(".flash")).to_contain_text("Approved")

            # nothing else started: the server's worker runs it on, and the page follows
            expect(watching.locator("#status")).to_have_text("completed", timeout=30_000)
            expect(watching.locator("#timeline")).to_contain_text("completion certified")
            watching.reload()
            expect(watching.locator("#timeline")).to_contain_text("files: note.txt")
            browser.close()

        types = until(lambda: [json.loads(r.body)["type"] for r in hook.got
                                if json.loads(r.body)["type"] == "agent.completed"])  # fmt: skip
        assert types == ["agent.completed"]
        assert all(verify(secret, r.headers, r.body) for r in hook.got)
        assert len(model.seen) == 2
