"""Every tutorial, followed as a reader would: its files written, its commands run.

Each tutorial has a test here that gives it what a reader has beside stead (a model
server, PostgreSQL), through the replacements it names, and runs the page with
:class:`~tests.docs.tutorial.Reader`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.models.fake_servers import FakeServer, Reply, openai_answer, openai_call

from .tutorial import HOW_TO, LOCAL_MODEL, TUTORIALS, Reader, tool_results


def test_first_agent(reader: Reader, tmp_path: Path) -> None:
    """The model writes notes.md, then finishes; the page's checks say it completed."""

    def answer(body: Any) -> Reply:
        if tool_results(body) == 0:
            args = {"path": "notes.md", "content": "# Tips\n\n1. Say what changed.\n"}
            return Reply(body=openai_answer([openai_call("c1", "write_file", args)]))
        done = {"summary": "notes.md holds three tips"}
        goal = openai_call("c2", "complete_goal", {"id": "notes"})
        return Reply(body=openai_answer([goal, openai_call("c3", "finish", done)]))

    with FakeServer() as model:
        model.responder = answer
        reader.replace[LOCAL_MODEL] = model.url
        reader.follow(TUTORIALS / "first-agent.md")
        assert model.seen, "the tutorial's agent never asked the model"
    notes = tmp_path / "first-agent"
    assert (notes / "agent.yaml").is_file()
    shown = json.loads(reader.run("stead --json show notes").output)
    assert shown["status"] == "completed"


def test_every_page_with_commands_is_followed_by_a_test() -> None:
    """A tutorial or how-to whose commands no test runs would go stale unseen."""
    tests = "".join(p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("test_*.py"))
    for page in sorted([*TUTORIALS.glob("*.md"), *HOW_TO.glob("*.md")]):
        if "```console" in page.read_text(encoding="utf-8"):
            assert f'"{page.name}"' in tests, f"no test follows {page.relative_to(page.parents[2])}"
