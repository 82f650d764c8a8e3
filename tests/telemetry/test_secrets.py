"""No secret, argument, result or prompt in any span, span event or metric attribute.

A provider model whose API key is in the vault drives tools that are given a
vault secret, return it and fail quoting it; every argument, the answer's
summary and the instructions carry markers. The journal holds them (redacted
where they are secrets); telemetry holds none of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from stead import Kind, parse_spec

from ..models.fake_servers import FakeServer
from ..models.test_providers import tool_answer
from .agents import runtime
from .conftest import Recorded

API_KEY = "sk-live-5b8e1f0c3a9d7264"
SECRET = "tok-Q8v2Lr5Zx1Wn7Kp3"
NEVER = [
    API_KEY,
    SECRET,
    "argument-marker-31",
    "target-marker-47",
    "summary-marker-59",
    "instruction-marker-83",
]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


def test_no_secret_nor_any_argument_result_or_prompt_reaches_an_attribute(
    tmp_path: Path, server: FakeServer, otel: Recorded
) -> None:
    rt = runtime(tmp_path)
    rt.vault().set("default", "OPENAI_API_KEY", API_KEY, to=["127.0.0.1"], at=0.0)
    rt.vault().set("default", "TOKEN", SECRET, at=0.0)
    spec = {
        "name": "leaky",
        # the target is a person's word: the data-flow monitor lets the call run
        "instructions": "Use the token, deploy to target-marker-47. instruction-marker-83",
        "model": {"provider": "openai", "name": "m-1", "base_url": server.url},
        "tools": ["tests.telemetry.tools:leak_token", "tests.telemetry.tools:deploy"],
        "autonomy": "act_autonomously",
    }
    agent_id = rt.create(parse_spec(spec, tmp_path)).agent_id
    server.queue(
        tool_answer("openai", ("leak_token", {"note": "argument-marker-31"})),
        tool_answer("openai", ("deploy", {"target": "target-marker-47"})),
        tool_answer("openai", ("finish", {"summary": "summary-marker-59"})),
    )
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason

    # the secrets really went through the calls (and the journal redacted them) ...
    results = [e.data for e in rt.store.read_events(agent_id) if e.kind == Kind.TOOL_RESULT]
    assert results[0]["output"] == {"token": "[secret:TOKEN]", "note": "argument-marker-31"}
    assert "[secret:TOKEN]" in results[1]["error"]
    assert server.seen[0].headers["authorization"] == f"Bearer {API_KEY}"
    outcomes = {
        (s.attributes or {})["gen_ai.tool.name"]: (s.attributes or {})["stead.tool.outcome"]
        for s in otel.spans("execute_tool")
    }
    assert outcomes == {"leak_token": "ok", "deploy": "error"}

    # ... and none of them, nor any argument, result or prompt, is in telemetry
    seen = otel.every_attribute()
    assert len(seen) > 100
    text = json.dumps([(k, str(v)) for k, v in seen])
    for value in NEVER:
        assert value not in text, value
    assert "[secret:TOKEN]" not in text  # not even redacted: results are not copied at all
    rt.close()
