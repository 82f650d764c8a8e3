"""An MCP server's tools, offered to a provider's model and called by it natively."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stead import Kind, parse_spec

from .agents import runtime
from .fake_servers import FakeServer
from .test_providers import tool_answer


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_model_is_offered_an_mcp_tool_and_calls_it(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    rt.vault().set(
        "default", f"{provider.upper()}_API_KEY", "sk-test-1", to=["127.0.0.1"], at=rt.clock.now()
    )
    spec = {
        "name": "clock",
        "instructions": "Tell me the time in UTC.",
        "model": {"provider": provider, "name": "m-1", "base_url": server.url},
        "mcp": [{"name": "time", "command": ["mcp-server-time"]}],
    }
    agent_id = rt.create(parse_spec(spec, tmp_path)).agent_id
    server.queue(
        tool_answer(provider, ("time__get_current_time", {"timezone": "UTC"})),
        tool_answer(provider, ("finish", {"summary": "told the time"})),
    )
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    # the first request offered the server's tool under its stead name, with its schema
    offered = server.seen[0].body["tools"]
    if provider == "openai":
        found = {t["function"]["name"]: t["function"]["parameters"] for t in offered}
    else:
        found = {t["name"]: t["input_schema"] for t in offered}
    assert found["time__get_current_time"]["required"] == ["timezone"]
    (result,) = [e.data for e in rt.store.read_events(agent_id) if e.kind == Kind.TOOL_RESULT]
    assert result["ok"] and result["output"]["structured"]["timezone"] == "UTC"
    # the server repeats it as JSON text: the model is shown it once, not escaped twice
    assert result["output"]["content"] == []
    # and the model was shown the result in its next request
    assert "UTC" in json.dumps(server.seen[1].body)
    shown = [m for m in server.seen[1].body["messages"] if "datetime" in json.dumps(m)]
    assert len(shown) == 1 and json.dumps(shown[0]).count("datetime") == 1
    rt.close()
