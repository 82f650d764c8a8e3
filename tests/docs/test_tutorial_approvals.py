"""The approvals tutorial, followed as a reader would, with a real browser on its page.

The page is run in two parts, split at its "Approve it" heading: between them the
agent waits, and Chromium (driven by Playwright) logs in with the reader's token and
checks that the inbox shows what the tutorial says it shows. After the second part,
the agent's page must show it completed, with the approval on its timeline.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.models.fake_servers import FakeServer, Reply, openai_answer, openai_call
from tests.needs import missing
from tests.server.process import free_port

from .tutorial import LOCAL_MODEL, TUTORIALS, Reader, tool_results

PAGE = TUTORIALS / "approvals-and-the-page.md"
SHOWN_APPROVAL = "apr_01M90Q19RF879X8EX66AM0XHX7"
"""The approval id the page shows; the reader types their own, the test the real one."""
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REPORT = "# Weekly report\n\nBuilt: the approvals inbox.\nLeft: the docs.\n"


def answer(body: Any) -> Reply:
    """Write report.md (which waits for approval), then complete the goal and finish."""
    if tool_results(body) == 0:
        call = openai_call("c1", "write_file", {"path": "report.md", "content": REPORT})
        return Reply(body=openai_answer([call], "I will write the weekly report to report.md."))
    goal = openai_call("c2", "complete_goal", {"id": "report"})
    done = openai_call("c3", "finish", {"summary": "report.md is written"})
    return Reply(body=openai_answer([goal, done]))


def split(page: Path, heading: str, folder: Path) -> tuple[Path, Path]:
    """The page as two pages, the second starting at ``heading``."""
    text = page.read_text(encoding="utf-8")
    at = text.index(f"\n{heading}\n")
    first, second = folder / "part1.md", folder / "part2.md"
    first.write_text(text[:at], encoding="utf-8")
    second.write_text(text[at:], encoding="utf-8")
    return first, second


def test_approvals_and_the_page(reader: Reader, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        missing("Debian's chromium is not installed", "apt-get install -y chromium")
    from playwright.sync_api import expect, sync_playwright

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    parts = tmp_path / "parts"
    parts.mkdir()
    before, after = split(PAGE, "## Approve it", parts)
    with FakeServer() as model, sync_playwright() as pw:
        model.responder = answer
        reader.replace |= {LOCAL_MODEL: model.url, "8750": str(port)}
        reader.follow(before)
        waiting = json.loads(reader.run("stead --json approvals").output)
        assert [a["tool"] for a in waiting] == ["write_file"]
        approval = waiting[0]["approval_id"]
        token = reader.run("echo $TOKEN").output.strip()

        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(base + "/")
        page.get_by_label("API token").fill(token)
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("table")).to_contain_text("weekly")
        expect(page.locator("table")).to_contain_text("waiting")
        page.get_by_role("link", name="Approvals").click()
        card = page.locator(f"#{approval}")
        expect(card.locator("h2")).to_contain_text("write_file")
        expect(card.locator(".who")).to_contain_text("reporter")
        expect(card.locator(".task")).to_have_text("report.md holds the weekly report")
        expect(card.locator(".why")).to_have_text("I will write the weekly report to report.md.")
        expect(card.locator(".diff")).to_contain_text("+Built: the approvals inbox.")
        for choice in ("15 minutes", "1 hour", "1 day"):
            expect(card.locator("select[name=valid_for]")).to_contain_text(choice)
        expect(card.get_by_role("button", name="Approve")).to_be_visible()
        expect(card.get_by_role("button", name="Deny")).to_be_visible()
        unwritten = json.loads(reader.run("stead --json show weekly").output)
        assert unwritten["status"] == "waiting" and unwritten["manifest"] == {}

        reader.replace[SHOWN_APPROVAL] = approval
        reader.follow(after)

        page.goto(base + "/approvals")
        expect(page.get_by_text("No approval is waiting.")).to_be_visible()
        page.get_by_role("link", name="Agents").click()
        page.get_by_role("link", name="weekly").first.click()
        expect(page.locator("#status")).to_have_text("completed")
        expect(page.locator("#timeline")).to_contain_text("approval granted")
        browser.close()
    shown = json.loads(reader.run("stead --json show weekly").output)
    assert shown["status"] == "completed"
    trace = reader.run("stead --json trace weekly").output
    kinds = [json.loads(line)["kind"] for line in trace.splitlines()]
    assert kinds.index("approval_granted") < kinds.index("tool_intent")
    assert list(shown["manifest"]) == ["report.md"]  # written once, after the approval
