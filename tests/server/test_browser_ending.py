"""In Chromium: a person cancels an agent from its page, then deletes it."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from tests.needs import missing

from .conftest import write_spec
from .process import stead_serve

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_a_person_cancels_then_deletes_an_agent_in_the_page(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        missing("Debian's chromium is not installed", "apt-get install -y chromium")
    from playwright.sync_api import expect, sync_playwright

    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "waiter", [{"wait_for_input": "go?"}, {"finish": "ok"}])
    with stead_serve(f"sqlite:///{tmp_path / 'stead.db'}", "--specs", str(specs)) as s:
        admin, _ = s.token("default", "admin")
        viewer, _ = s.token("default", "viewer")
        made = httpx.post(f"{s.base}/v1/agents", json={"spec_file": "waiter.yaml"},
                          headers={"authorization": f"Bearer {admin}"})  # fmt: skip
        agent_id = made.json()["agent_id"]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page()
            # a viewer is offered neither
            page.goto(s.base + "/login")
            page.fill("#token", viewer)
            page.click("button[type=submit]")
            page.goto(f"{s.base}/agents/{agent_id}")
            expect(page.locator("#status")).to_have_text("waiting", timeout=20_000)
            assert page.locator("#cancel").count() == 0 and page.locator("#delete").count() == 0
            page.context.clear_cookies()

            page.goto(s.base + "/login")
            page.fill("#token", admin)
            page.click("button[type=submit]")
            page.goto(f"{s.base}/agents/{agent_id}")
            page.fill("#cancel input[name=reason]", "the task was withdrawn")
            page.click("#cancel button")
            expect(page.locator("#status")).to_have_text("cancelled")
            expect(page.locator("main")).to_contain_text("the task was withdrawn")
            assert page.locator("#cancel").count() == 0

            page.click("#delete summary")
            page.fill("#delete input[name=confirm]", "not its id")
            page.click("#delete button")
            expect(page.locator("main")).to_contain_text("type its id to confirm")
            page.goto(f"{s.base}/agents/{agent_id}")
            page.click("#delete summary")
            page.fill("#delete input[name=confirm]", agent_id)
            page.click("#delete button")
            expect(page.locator(".flash")).to_contain_text(f"Deleted {agent_id}")
            expect(page.locator("table")).not_to_contain_text(agent_id)

            # retention: a second agent, cancelled, goes with a retention of 0 days
            other = httpx.post(
                f"{s.base}/v1/agents",
                json={"spec_file": "waiter.yaml"},
                headers={"authorization": f"Bearer {admin}"},
            ).json()["agent_id"]
            httpx.post(f"{s.base}/v1/agents/{other}/cancel", json={"reason": "done"},
                       headers={"authorization": f"Bearer {admin}"})  # fmt: skip
            page.goto(s.base + "/")
            page.click("#retention summary")
            page.fill("#retention input[name=days]", "0")
            page.check("#retention input[name=dry_run]")
            page.click("#retention button")
            expect(page.locator("#collected")).to_contain_text("Would delete 1 finished")
            expect(page.locator("table")).to_contain_text(other)
            page.click("#retention summary")
            page.fill("#retention input[name=days]", "0")
            page.click("#retention button")
            expect(page.locator("#collected")).to_contain_text("Deleted 1 finished")
            expect(page.locator("table")).not_to_contain_text(other)
            browser.close()
