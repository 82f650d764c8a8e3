"""Every tutorial, followed as a reader would: its files written, its commands run.

Each tutorial has a test here that gives it what a reader has beside stead (a model
server, PostgreSQL), through the replacements it names, and runs the page with
:class:`~tests.docs.tutorial.Reader`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.models.fake_servers import FakeServer, Reply, openai_answer, openai_call

from .tutorial import Reader

TUTORIALS = Path(__file__).parents[2] / "docs" / "tutorials"
LOCAL_MODEL = "http://127.0.0.1:11434/v1"
"""Where the tutorials' local model server is; the tests' fake one stands in for it."""


def reader_env(tmp_path: Path) -> dict[str, str]:
    """A reader's environment: their PATH and locale, none of the suite's STEAD_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir()
    return env


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    r = Reader(tmp_path, reader_env(tmp_path))
    try:
        yield r
    finally:
        r.close()


def tool_results(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")


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
