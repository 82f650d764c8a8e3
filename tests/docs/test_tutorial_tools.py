"""The tool tutorials, followed as a reader would: an MCP server's tools, and tools in Python.

The model is our fake OpenAI-compatible server in place of the reader's local one; the
MCP server is the real ``mcp-server-time`` from PyPI, run in the agent's sandbox.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.models.fake_servers import FakeServer, Reply, openai_answer, openai_call

from .tutorial import LOCAL_MODEL, TUTORIALS, Reader, tool_results


def last_tool_output(body: dict[str, Any]) -> str:
    tools = [m for m in body.get("messages", []) if m.get("role") == "tool"]
    content = tools[-1]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def test_mcp_tools(reader: Reader) -> None:
    """The model asks the time server for Paris's time, and answers with what it said."""

    def answer(body: Any) -> Reply:
        if tool_results(body) == 0:
            call = openai_call("c1", "time__get_current_time", {"timezone": "Europe/Paris"})
            return Reply(body=openai_answer([call]))
        stamp = re.search(r"\d{4}-\d\d-\d\dT(\d\d:\d\d)[^\"\\]*", last_tool_output(body))
        assert stamp, "the server's answer did not reach the model"
        said = f"It is {stamp[1]} in Paris ({stamp[0]})."
        return Reply(body=openai_answer([openai_call("c2", "finish", {"summary": said})]))

    with FakeServer() as model:
        model.responder = answer
        reader.replace[LOCAL_MODEL] = model.url
        reader.follow(TUTORIALS / "mcp-tools.md")
    shown = json.loads(reader.run("stead --json show clock").output)
    assert shown["status"] == "completed"
    # the answer holds Paris's offset (+01:00 or, in summer, +02:00), from the server
    assert re.search(r"\+0[12]:00\)", shown["finish"]["summary"])
    trace = [
        json.loads(line) for line in reader.run("stead --json trace clock").output.splitlines()
    ]
    kinds = [e["kind"] for e in trace]
    assert "mcp_tools_listed" in kinds
    (result,) = [e for e in trace if e["kind"] == "tool_result"]
    assert result["data"]["tool"] == "time__get_current_time" and result["data"]["ok"]


def test_python_tools(reader: Reader, tmp_path: Path) -> None:
    """Both agents count the words and post once each; the script's agent completes."""

    def answer(body: Any) -> Reply:
        n = tool_results(body)
        if n == 0:
            call = openai_call("c1", "count_words", {"path": "notes.md"})
        elif n == 1:
            words = json.loads(last_tool_output(body))["words"]
            call = openai_call("c2", "post_message", {"text": f"notes.md has {words} words"})
        else:
            call = openai_call("c3", "finish", {"summary": "posted the count"})
        return Reply(body=openai_answer([call]))

    with FakeServer() as model:
        model.responder = answer
        reader.replace[LOCAL_MODEL] = model.url
        ran = reader.follow(TUTORIALS / "python-tools.md")
    folder = tmp_path / "word-count"
    posts = [json.loads(line) for line in (folder / "outbox.jsonl").read_text().splitlines()]
    assert [p["text"] for p in posts] == ["notes.md has 9 words"] * 2
    assert posts[0]["key"].startswith("words/") and posts[0]["key"] != posts[1]["key"]
    agents = json.loads(reader.run("stead --json ls").output)
    assert sorted(a["status"] for a in agents) == ["completed", "completed"]
    printed = next(r.output for r in ran if r.command == "python drive.py")
    assert "post_message True {'posted': True}" in printed
