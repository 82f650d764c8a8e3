"""A provider's model over HTTP (the fake OpenAI server): the GenAI token attributes,
the HTTP attempts, and model calls answered on the parked worker's event loop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stead import Runtime, parse_spec
from stead.workers.parked import ParkedWorker

from ..models.fake_servers import FakeServer, Reply, openai_answer, openai_call
from ..models.test_providers import error, tool_answer
from .agents import runtime
from .conftest import Recorded

KEY = "sk-live-7c2e9b41d0a8f356"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


def agent(rt: Runtime, tmp_path: Path, url: str) -> str:
    rt.vault().set("default", "OPENAI_API_KEY", KEY, to=["127.0.0.1"], at=rt.clock.now())
    spec = {
        "name": "writer",
        "instructions": "Write hello.txt, then finish.",
        "model": {"provider": "openai", "name": "m-1", "base_url": url},
        "tools": ["write_file", "read_file"],
    }
    return rt.create(parse_spec(spec, tmp_path)).agent_id


def test_each_answer_is_a_chat_span_with_its_tokens_and_attempts(
    tmp_path: Path, server: FakeServer, otel: Recorded
) -> None:
    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, server.url)
    busy = error("openai", 429, "slow down")
    busy.headers = {"retry-after": "0"}
    cached = Reply(
        200,
        openai_answer(
            [openai_call("c1", "read_file", {"path": "hello.txt"})],
            prompt_tokens=400,
            completion_tokens=7,
            cached_tokens=300,
        ),
    )
    server.queue(
        tool_answer("openai", ("write_file", {"path": "hello.txt", "content": "hello"})),
        busy,
        cached,
        tool_answer("openai", ("finish", {"summary": "wrote hello.txt"})),
    )
    assert rt.run(agent_id).state.status == "completed"

    chats = sorted(otel.spans("chat"), key=lambda s: s.start_time or 0)
    assert [c.name for c in chats] == ["chat m-1"] * 3
    seen = [
        (
            a["gen_ai.provider.name"],
            a["gen_ai.system"],
            a["gen_ai.request.model"],
            a["gen_ai.usage.input_tokens"],
            a["gen_ai.usage.output_tokens"],
            a["stead.model.attempts"],
        )
        for a in (c.attributes or {} for c in chats)
    ]
    assert seen == [
        ("openai", "openai", "m-1", 100, 20, 1),
        ("openai", "openai", "m-1", 400, 7, 2),
        ("openai", "openai", "m-1", 100, 20, 1),
    ]
    assert (chats[1].attributes or {})["gen_ai.usage.cache_read.input_tokens"] == 300
    statuses = [(e.attributes or {})["http.response.status_code"] for e in chats[1].events]
    assert statuses == [429, 200]
    assert all(c.kind.name == "CLIENT" for c in chats)
    tokens = {
        p.attributes["gen_ai.token.type"]: (p.sum, p.count)
        for p in otel.points("gen_ai.client.token.usage")
    }
    assert tokens == {"input": (600, 3), "output": (47, 3)}
    assert {
        p.attributes["gen_ai.request.model"] for p in otel.points("gen_ai.client.token.usage")
    } == {"m-1"}
    rt.close()


def test_answers_asked_on_the_parked_workers_event_loop_stay_in_their_agents_trace(
    tmp_path: Path, server: FakeServer, otel: Recorded
) -> None:
    def answer(body: Any) -> Reply:
        wrote = any(m.get("role") == "tool" for m in body["messages"])
        if wrote:
            return tool_answer("openai", ("finish", {"summary": "wrote hello.txt"}))
        return tool_answer("openai", ("write_file", {"path": "hello.txt", "content": "hi"}))

    server.responder = answer
    rt = runtime(tmp_path)
    agents = [agent(rt, tmp_path, server.url) for _ in range(4)]
    report = ParkedWorker(rt, in_flight=4, threads=2).run_until_idle()
    assert sorted(report.ran) == sorted(agents)
    assert all(rt.store.load_state(a).status == "completed" for a in agents)

    spans = otel.spans()
    by_id = {s.context.span_id: s for s in spans}
    activations = {(s.attributes or {})["gen_ai.agent.id"]: s for s in otel.spans("invoke_agent")}
    assert sorted(activations) == sorted(agents)
    assert len({s.context.trace_id for s in activations.values()}) == 4
    chats = otel.spans("chat")
    assert len(chats) == 8
    for chat in chats:
        assert chat.parent is not None
        step = by_id[chat.parent.span_id]
        assert step.name == "stead.step"
        assert step.parent is not None
        owner = by_id[step.parent.span_id]
        # the step's agent is the one whose trace the answer is in
        assert owner is activations[(step.attributes or {})["gen_ai.agent.id"]]
        assert chat.context.trace_id == owner.context.trace_id
        assert (chat.attributes or {})["gen_ai.usage.input_tokens"] == 100
    rt.close()
