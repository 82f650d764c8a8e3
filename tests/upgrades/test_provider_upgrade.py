"""A provider's model sees an upgrade: its next request carries the new instructions
and tools, and an upgraded model's endpoint is the one asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stead import Kind, parse_spec

from ..models.agents import provider_agent, runtime
from ..models.fake_servers import FakeServer, calls_in
from ..models.test_providers import tool_answer

ASK = ("wait_for_input", {"prompt": "more?"})


def system_text(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def test_a_waiting_agent_s_next_request_shows_the_upgraded_spec(
    tmp_path: Path, server: FakeServer
) -> None:
    rt = runtime(tmp_path)
    agent_id = provider_agent(rt, tmp_path, "openai", server.url, "sk-test-KEY-0123456789",
                              name="helper", instructions="Answer in English.",
                              tools=["read_file"], on_text="refuse")  # fmt: skip
    server.queue(tool_answer("openai", ASK))
    assert rt.run(agent_id, max_steps=1).state.status == "waiting"
    first = server.seen[-1].body
    assert "Answer in English." in system_text(first)
    assert "list_files" not in calls_in(first)
    model = {"provider": "openai", "name": "m-1", "base_url": server.url}
    new = parse_spec(
        {
            "name": "helper",
            "instructions": "Answer in French.",
            "model": model,
            "tools": ["read_file", "list_files"],
            "on_text": "refuse",
        },
        tmp_path,
    )
    found = rt.upgrade(agent_id, new, reason="French speakers")
    assert [c.field for c in found.changes] == ["instructions", "tools"]  # the same model
    rt.send(agent_id, "bonjour")
    server.queue(tool_answer("openai", ("list_files", {"path": "."})), tool_answer("openai", ASK))
    assert rt.run(agent_id, max_steps=2).state.status == "waiting"
    after = server.seen[-2].body
    assert "Answer in French." in system_text(after)
    assert "Answer in English." not in system_text(after)
    assert {"read_file", "list_files"} <= set(calls_in(after))
    # the call of the new tool ran under the grant the upgrade gave it
    results = [e.data for e in rt.store.read_events(agent_id) if e.kind == Kind.TOOL_RESULT]
    assert results and results[-1]["tool"] == "list_files" and results[-1]["ok"]
