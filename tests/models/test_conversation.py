"""The conversation a provider model is shown: built from the journal, whole results,
append-only turns, compaction for long runs, and the same bytes after a resume."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from stead import Kind, Runtime, parse_spec
from stead.models.conversation import RESULT_CAP

from .agents import assert_resumes_render_the_same, runtime
from .fake_servers import FakeServer, Reply, anthropic_answer, anthropic_text, openai_answer
from .test_providers import tool_answer

DONE = (("complete_goal", {"id": "read"}), ("finish", {"summary": "done"}))


def _uncached(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without Anthropic's cache breakpoint, which moves to the newest stable block."""
    mark = ', "cache_control": {"type": "ephemeral"}'
    return list(json.loads(json.dumps(messages).replace(mark, "")))


def make(rt: Runtime, tmp_path: Path, provider: str, url: str, **model: Any) -> str:
    (tmp_path / "seed").mkdir(exist_ok=True)
    spec = {
        "name": "reader",
        "instructions": "Read the files and remember what they say.",
        "model": {"provider": provider, "name": "m-1", "base_url": url, **model},
        "tools": ["read_file", "write_file"],
        "goals": [{"id": "read", "description": "every file read"}],
        "workspace": "seed",
        "limits": {"max_steps": 5000},
    }
    return rt.create(parse_spec(spec, tmp_path)).agent_id


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body["messages"])


def test_a_whole_result_is_shown_and_a_long_one_can_be_read_on(
    tmp_path: Path, server: FakeServer
) -> None:
    (tmp_path / "seed").mkdir()
    big = "".join(f"line {i:05d}\n" for i in range(3000))  # 33,000 characters
    (tmp_path / "seed" / "big.txt").write_text(big)
    (tmp_path / "seed" / "small.txt").write_text("x" * 5000)
    rt = runtime(tmp_path)
    agent_id = make(rt, tmp_path, "openai", server.url)
    server.queue(
        tool_answer(
            "openai", ("read_file", {"path": "small.txt"}), ("read_file", {"path": "big.txt"})
        ),
        Reply(200, openai_answer()),  # replaced below: needs the seq from the note
    )
    server.replies.pop()

    def responder(body: Any) -> Reply:
        tool_msgs = [m for m in body["messages"] if m["role"] == "tool"]
        if len(tool_msgs) == 2:
            note = tool_msgs[1]["content"].rsplit("read_result with ", 1)[1].rstrip("]")
            return tool_answer("openai", ("read_result", json.loads(note)))
        return tool_answer(
            "openai", ("complete_goal", {"id": "read"}), ("finish", {"summary": "read"})
        )

    server.responder = responder
    assert rt.run(agent_id).state.status == "completed"
    second = messages_of(server.seen[1].body)
    small, cut = [m["content"] for m in second if m["role"] == "tool"]
    assert small == "x" * 5000  # whole, not 800 characters
    assert cut.startswith(big[:RESULT_CAP]) and "more characters" in cut
    third = messages_of(server.seen[2].body)
    read_on = [m["content"] for m in third if m["role"] == "tool"][2]
    assert read_on.startswith(big[RESULT_CAP : RESULT_CAP + 100])
    (read,) = [e for e in rt.store.read_events(agent_id) if e.kind == Kind.RESULT_READ]
    assert read.data["offset"] == RESULT_CAP and read.data["call"] == "call_1_1"
    rt.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_turns_only_grow_and_the_status_comes_last(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    agent_id = make(rt, tmp_path, provider, server.url)
    server.queue(
        tool_answer(provider, ("write_file", {"path": "a.txt", "content": "A"})),
        tool_answer(provider, ("remember", {"values": {"a": "written"}})),
        tool_answer(provider, ("read_file", {"path": "a.txt"})),
        tool_answer(provider, *DONE),
    )
    assert rt.run(agent_id).state.status == "completed"
    bodies = [messages_of(s.body) for s in server.seen]
    for earlier, later in itertools.pairwise(bodies):
        stable = _uncached(earlier[:-1])  # all but the status message, which changes
        assert _uncached(later)[: len(stable)] == stable
    status = json.dumps(bodies[-1][-1])
    assert "## Goals" in status and "## Memory" in status and '\\"a\\": \\"written\\"' in status
    rt.close()


def test_a_resumed_agent_is_shown_exactly_what_it_would_have_been(
    tmp_path: Path, server: FakeServer
) -> None:
    rt = runtime(tmp_path)
    agent_id = make(rt, tmp_path, "openai", server.url)
    server.queue(
        tool_answer("openai", ("write_file", {"path": "a.txt", "content": "A"})),
        tool_answer("openai", ("read_file", {"path": "a.txt"}), ("remember", {"values": {"n": 1}})),
        tool_answer("openai", ("wait_for_input", {"prompt": "more?"})),
    )
    assert rt.run(agent_id).state.status == "waiting"
    rt.send(agent_id, "read it again")
    rt.close()
    # a new worker process would rebuild the conversation from the journal
    again = runtime(tmp_path)
    server.queue(
        tool_answer("openai", ("complete_goal", {"id": "read"}), ("finish", {"summary": "done"}))
    )
    assert again.run(agent_id).state.status == "completed"
    assert_resumes_render_the_same(again, agent_id)
    last = messages_of(server.seen[-1].body)
    assert any(m["role"] == "user" and m["content"] == "A person says: read it again" for m in last)
    again.close()


def _long_run_responder(summaries: list[str], steps: int, provider: str) -> Any:
    count = {"decisions": 0}

    def respond(body: Any) -> Reply:
        if "tools" not in body:  # a compaction's summary request
            summaries.append(body["messages"][-1]["content"] if provider == "openai" else "")
            text = f"summary {len(summaries)}: files read so far, memory kept"
            if provider == "openai":
                return Reply(200, openai_answer(text=text))
            return Reply(200, anthropic_answer([anthropic_text(text)]))
        count["decisions"] += 1
        n = count["decisions"]
        if n >= steps:
            done = ("finish", {"summary": f"read {n} times"})
            return tool_answer(provider, ("complete_goal", {"id": "read"}), done)
        if n % 100 == 0:
            return tool_answer(provider, ("remember", {"values": {"checkpoint": n}}))
        return tool_answer(provider, ("read_file", {"path": f"page{n % 3}.txt"}))

    return respond


@pytest.mark.parametrize(("provider", "steps"), [("openai", 2000), ("anthropic", 300)])
def test_a_long_run_stays_inside_a_small_window(
    tmp_path: Path, server: FakeServer, provider: str, steps: int
) -> None:
    (tmp_path / "seed").mkdir()
    for i in range(3):
        (tmp_path / "seed" / f"page{i}.txt").write_text(f"page {i} " + "word " * 120)
    rt = runtime(tmp_path)
    window, answer = 4096, 256
    agent_id = make(rt, tmp_path, provider, server.url, context_window=window, max_tokens=answer)
    summaries: list[str] = []
    server.responder = _long_run_responder(summaries, steps, provider)
    half = rt.run(agent_id, max_steps=steps // 2).state
    assert half.status == "running" and half.decisions == steps // 2, half.status_reason
    rt.close()
    rt = runtime(tmp_path)  # resumed in the middle, by a new worker
    state = rt.run(agent_id, max_steps=steps).state
    assert state.status == "completed", state.status_reason
    assert state.memory["checkpoint"] == (steps - 1) // 100 * 100
    compacted = [e for e in rt.store.read_events(agent_id) if e.kind == Kind.CONTEXT_COMPACTED]
    assert len(compacted) >= 5 and all(e.data["summary"].startswith("summary") for e in compacted)
    remembered = False
    for seen in server.seen:
        size = len(json.dumps(seen.body)) / 4
        assert size <= window, f"a request of {size} tokens passed the window: {seen.body}"
        if "tools" in seen.body:
            text = json.dumps(seen.body)
            assert "## Goals" in text and "every file read" in text and "## Memory" in text
            assert "Read the files and remember" in text  # the instructions, every time
            # once remembered, the memory's values are in every request after
            remembered = remembered or "checkpoint" in text
            assert not remembered or '\\"checkpoint\\"' in text
    assert remembered
    # a worker resuming before any of these decisions would have shown the very same
    assert_resumes_render_the_same(rt, agent_id, every=max(1, state.decisions // 25))
    rt.close()


def test_compaction_lands_where_the_spec_says(tmp_path: Path, server: FakeServer) -> None:
    """``compact_at`` and ``compact_to`` bound a long run's requests: none passes the
    first share of the room (window less answer), and each compaction brings the
    conversation down to about the second plus its summary."""
    (tmp_path / "seed").mkdir()
    for i in range(3):
        (tmp_path / "seed" / f"page{i}.txt").write_text(f"page {i} " + "word " * 120)
    rt = runtime(tmp_path)
    window, answer, at, to = 16_384, 256, 0.4, 0.1
    agent_id = make(rt, tmp_path, "openai", server.url, context_window=window,
                    max_tokens=answer, compact_at=at, compact_to=to)  # fmt: skip
    summaries: list[str] = []
    server.responder = _long_run_responder(summaries, 400, "openai")
    assert rt.run(agent_id, max_steps=400).state.status == "completed"
    room = window - answer
    sizes = [wire_tokens(s.body) if "tools" in s.body else None for s in server.seen]
    asked = [s for s in sizes if s is not None]
    assert len(summaries) >= 3 and max(asked) <= at * room
    fixed = asked[0]  # the first request: instructions, tools and the status alone
    for i, size in enumerate(sizes):
        if size is None:  # a summary was asked (beside a decision: of the next two
            # requests, one was asked with the turns it replaces, one after it)
            after = min([s for s in sizes[i - 1 : i + 3] if s is not None][-2:])
            assert after <= fixed + 1.3 * to * room + 200, (after, fixed)
    rt.close()


def wire_tokens(body: Any) -> float:
    """A request's tokens at about four characters each, as sent (no spaces)."""
    return len(json.dumps(body, separators=(",", ":"), ensure_ascii=False)) / 4


def test_a_context_too_long_answer_compacts_and_retries_once(
    tmp_path: Path, server: FakeServer
) -> None:
    rt = runtime(tmp_path)
    agent_id = make(rt, tmp_path, "openai", server.url)
    server.queue(
        tool_answer("openai", ("write_file", {"path": "a.txt", "content": "A"})),
        tool_answer("openai", ("read_file", {"path": "a.txt"})),
        Reply(400, {"error": {"message": "This model's maximum context length is 8192 tokens",
                              "type": "invalid_request_error", "code": "context_length_exceeded"}}),
        Reply(200, openai_answer(text="summary: a.txt written with A and read back")),
        tool_answer("openai", *DONE),
    )  # fmt: skip
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    (compacted,) = [e for e in rt.store.read_events(agent_id) if e.kind == Kind.CONTEXT_COMPACTED]
    assert compacted.data["summary"].startswith("summary: a.txt written")
    retry = messages_of(server.seen[4].body)
    assert retry[1]["content"].startswith("Summary of the work so far:\nsummary: a.txt written")
    assert "tools" not in server.seen[3].body  # the summary was asked without tools
    # the request refused as too long is journaled with the summary that answered it
    assert [a["status"] for a in compacted.data["attempts"]] == [400, 200]
    rt.close()


def test_the_budget_monitor_counts_a_providers_tokens(tmp_path: Path, server: FakeServer) -> None:
    rt = runtime(tmp_path)
    (tmp_path / "seed").mkdir()
    spec = {
        "name": "spender",
        "model": {"provider": "anthropic", "name": "m-1", "base_url": server.url},
        "tools": ["read_file"],
        "workspace": "seed",
        "monitors": {"budget": {"tokens": 300}},
    }
    agent_id = rt.create(parse_spec(spec, tmp_path)).agent_id
    server.responder = lambda body: tool_answer("anthropic", ("remember", {"values": {"x": 1}}))
    state = rt.run(agent_id).state
    assert state.status == "needs_attention" and "budget" in state.status_reason
    assert state.decisions == 3  # 120 tokens each: the third crosses 300
    rt.close()


def test_a_hibernated_agents_model_can_be_swapped(tmp_path: Path, server: FakeServer) -> None:
    rt = runtime(tmp_path)
    agent_id = make(rt, tmp_path, "openai", server.url)
    server.queue(tool_answer("openai", ("wait_for_input", {"prompt": "go?"})))
    assert rt.run(agent_id).state.status == "waiting"
    rt.hibernate(agent_id)
    with FakeServer() as other:
        state = rt.set_model(agent_id, "anthropic:claude-x")
        assert state.status == "hibernated"
        rt.set_model(agent_id, {"provider": "anthropic", "name": "claude-x", "base_url": other.url})
        rt.send(agent_id, "go")
        other.queue(tool_answer("anthropic", *DONE))
        assert rt.run(agent_id).state.status == "completed"
        assert other.seen[0].body["model"] == "claude-x"
    rt.close()


def test_a_cheaper_summarizer_named_in_the_spec_writes_the_summaries(
    tmp_path: Path, server: FakeServer
) -> None:
    (tmp_path / "seed").mkdir()
    for i in range(3):
        (tmp_path / "seed" / f"page{i}.txt").write_text(f"page {i} " + "word " * 120)
    rt = runtime(tmp_path)
    summarizer = {"provider": "anthropic", "name": "haiku-cheap", "base_url": server.url}
    agent_id = make(
        rt, tmp_path, "openai", server.url, context_window=4096, max_tokens=256,
        summarizer=summarizer,
    )  # fmt: skip
    summaries: list[str] = []
    main_model = _long_run_responder(summaries, 60, "openai")

    def respond(body: Any) -> Reply:
        if body["model"] == "haiku-cheap":
            assert "tools" not in body and body["system"].startswith("You compress")
            return Reply(200, anthropic_answer([anthropic_text("cheap summary")]))
        return main_model(body)  # type: ignore[no-any-return]

    server.responder = respond
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    compacted = [e for e in rt.store.read_events(agent_id) if e.kind == Kind.CONTEXT_COMPACTED]
    assert compacted and all(e.data["model"] == "anthropic:haiku-cheap" for e in compacted)
    assert all(e.data["summary"] == "cheap summary" for e in compacted)
    assert not summaries  # the agent's own model was never asked for one
    rt.close()


def test_a_call_of_unknown_outcome_and_its_resolution_are_shown_as_such() -> None:
    from stead.journal import Event
    from stead.models.conversation import Transcript

    def ev(seq: int, kind: str, **data: Any) -> Event:
        return Event("ag", seq, kind, 0.0, data, "", "", 0)

    t = Transcript()
    action = {"type": "tool", "tool": "deploy", "args": {}, "call_id": "call_RANDOM"}
    t.observe(ev(5, Kind.DECISION, actions=[action], step=2, context_hash="h"))
    t.observe(ev(6, Kind.OUTCOME_UNKNOWN, call_id="call_RANDOM", reason="the worker died"))
    t.observe(ev(7, Kind.CALL_RESOLVED, call_id="call_RANDOM", resolution="done", output="v2"))
    turns = t.messages("status")
    assert turns[0].calls[0].id == "call_2_0"  # the decision's number, not the random id
    assert turns[1].role == "tool" and "outcome is unknown" in turns[1].text
    assert turns[1].call_id == "call_2_0" and turns[1].is_error
    assert turns[2].text == 'About your call call_2_0: a person resolved it as done: "v2"'
