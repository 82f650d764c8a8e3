"""The spans and metrics of real scripted runs, read from the SDK's in-memory exporter."""

from __future__ import annotations

from pathlib import Path

import pytest

from stead import FakeClock, Kind
from stead.telemetry.spans import ActivationTrace

from .agents import runtime, scripted
from .conftest import Recorded

SCRIPT = [
    {"tool": "write_file", "args": {"path": "notes.txt", "content": "one\n"}},
    {"tools": [{"tool": "read_file", "args": {"path": "notes.txt"}}, {"tool": "list_files"}]},
    {"finish": "notes written"},
]


def test_a_run_is_one_trace_of_its_activation_steps_model_calls_and_tool_calls(
    tmp_path: Path, otel: Recorded
) -> None:
    rt = runtime(tmp_path)
    agent_id = scripted(rt, tmp_path, SCRIPT)
    assert rt.run(agent_id).state.status == "completed"

    (activation,) = otel.spans("invoke_agent")
    assert activation.name == "invoke_agent writer"
    a = activation.attributes or {}
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.id"] == agent_id
    assert a["stead.agent.status"] == "completed"
    assert (a["stead.activation.decisions"], a["stead.activation.steps"]) == (3, 3)
    assert activation.parent is None
    assert {s.context.trace_id for s in otel.spans()} == {activation.context.trace_id}

    steps = sorted(otel.spans("stead.step"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {})["stead.step.number"] for s in steps] == [1, 2, 3]
    assert [(s.attributes or {})["stead.step.tool_calls"] for s in steps] == [1, 2, 0]
    assert all((s.attributes or {})["stead.step.outcome"] == "completed" for s in steps)
    assert all(s.parent is not None and s.parent.span_id == activation.context.span_id
               for s in steps)  # fmt: skip
    step_ids = [s.context.span_id for s in steps]

    chats = sorted(otel.spans("chat"), key=lambda s: s.start_time or 0)
    assert [c.parent.span_id for c in chats if c.parent] == step_ids  # one answer a step
    for c in chats:
        attrs = c.attributes or {}
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == attrs["gen_ai.system"] == "scripted"
        assert attrs["gen_ai.request.model"] == "scripted"
        assert attrs["stead.model.answer"] == "decision"
        assert c.name == "chat scripted"

    tools = sorted(otel.spans("execute_tool"), key=lambda s: s.start_time or 0)
    seen = [
        (
            t.name,
            (t.attributes or {})["stead.tool.effect"],
            (t.attributes or {})["stead.tool.verdict"],
            (t.attributes or {})["stead.tool.outcome"],
            step_ids.index(t.parent.span_id) if t.parent else None,
        )
        for t in tools
    ]
    assert seen == [
        ("execute_tool write_file", "idempotent", "allow", "ok", 0),
        ("execute_tool read_file", "read_only", "allow", "ok", 1),
        ("execute_tool list_files", "read_only", "allow", "ok", 1),
    ]
    calls = [
        e.data["call_id"] for e in rt.store.read_events(agent_id) if e.kind == Kind.TOOL_RESULT
    ]
    assert [(t.attributes or {})["gen_ai.tool.call.id"] for t in tools] == calls

    assert otel.total("stead.steps", **{"gen_ai.agent.name": "writer"}) == 3
    durations = otel.points("stead.tool.duration")
    assert sorted((p.attributes["gen_ai.tool.name"], p.count) for p in durations) == [
        ("list_files", 1),
        ("read_file", 1),
        ("write_file", 1),
    ]
    (answers,) = otel.points("gen_ai.client.operation.duration")
    assert answers.count == 3
    rt.close()


def test_a_wait_for_approval_is_marked_counted_and_its_answer_timed(
    tmp_path: Path, otel: Recorded
) -> None:
    clock = FakeClock()
    rt = runtime(tmp_path, clock)
    script = [
        {"tool": "write_file", "args": {"path": "a.txt", "content": "a\n"}},
        {"tool": "write_file", "args": {"path": "b.txt", "content": "b\n"}},
        {"finish": "done"},
    ]
    agent_id = scripted(rt, tmp_path, script, autonomy="act_with_approval")
    state = rt.run(agent_id).state
    assert (state.status, state.waiting_for) == ("waiting", "approval")
    (held,) = otel.spans("execute_tool")
    attrs = held.attributes or {}
    assert (attrs["stead.tool.verdict"], attrs["stead.tool.outcome"]) == (
        "ask",
        "awaiting_approval",
    )
    (asked,) = [e for e in held.events if e.name == "stead.approval.requested"]
    (approval_id,) = state.approvals
    assert (asked.attributes or {})["stead.approval.id"] == approval_id
    (step,) = otel.spans("stead.step")
    assert (step.attributes or {})["stead.step.outcome"] == "waiting"
    (activation,) = otel.spans("invoke_agent")
    assert (activation.attributes or {})["stead.agent.waiting_for"] == "approval"
    assert otel.total("stead.approvals.pending") == 1

    clock.advance(300)
    rt.approve(approval_id, valid_for=900)
    (wait,) = otel.spans("stead.approval.wait")
    w = wait.attributes or {}
    assert (w["stead.approval.answer"], w["gen_ai.tool.name"]) == ("granted", "write_file")
    assert ((wait.end_time or 0) - (wait.start_time or 0)) / 1e9 == 300
    assert otel.total("stead.approvals.pending") == 0
    assert otel.total("stead.approval.wait", **{"stead.approval.answer": "granted"}) == 300

    otel.exporter.clear()
    state = rt.run(agent_id).state  # the step goes on from the approved call
    assert (state.status, state.waiting_for) == ("waiting", "approval")  # the next call asks
    first, second = sorted(otel.spans("stead.step"), key=lambda s: s.start_time or 0)
    f = first.attributes or {}
    assert (f["stead.step.number"], f["stead.step.resumed"], f["stead.step.outcome"]) == (
        1,
        True,
        "completed",
    )
    s = second.attributes or {}
    assert (s["stead.step.number"], s["stead.step.outcome"]) == (2, "waiting")
    ran, held_again = sorted(otel.spans("execute_tool"), key=lambda s: s.start_time or 0)
    r = ran.attributes or {}
    assert (r["stead.tool.verdict"], r["stead.tool.outcome"]) == ("allow", "ok")
    assert r["stead.approval.id"] == approval_id
    assert ran.parent is not None and ran.parent.span_id == first.context.span_id
    assert (held_again.attributes or {})["stead.tool.outcome"] == "awaiting_approval"
    assert otel.total("stead.approvals.pending") == 1

    (second_id,) = rt.store.load_state(agent_id).approvals
    rt.deny(second_id, "not b")
    denied = [s for s in otel.spans("stead.approval.wait")]
    assert [(s.attributes or {})["stead.approval.answer"] for s in denied] == ["denied"]
    assert otel.total("stead.approvals.pending") == 0
    assert rt.run(agent_id).state.status == "completed"
    rt.close()


def test_a_model_that_fails_ends_its_span_in_error_and_the_agent_needs_attention(
    tmp_path: Path, otel: Recorded
) -> None:
    rt = runtime(tmp_path)
    agent_id = scripted(rt, tmp_path, [{"tool": "list_files"}])  # then nothing more
    state = rt.run(agent_id).state
    assert state.status == "needs_attention"
    first, second = sorted(otel.spans("chat"), key=lambda s: s.start_time or 0)
    assert (first.attributes or {})["stead.model.answer"] == "decision"
    failed = second.attributes or {}
    assert failed["stead.model.answer"] == "error"
    assert failed["error.type"] == "ModelError"
    assert not second.status.is_ok
    (activation,) = otel.spans("invoke_agent")
    assert (activation.attributes or {})["stead.agent.status"] == "needs_attention"
    steps = sorted(otel.spans("stead.step"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {})["stead.step.outcome"] for s in steps] == [
        "completed",
        "needs_attention",
    ]
    (errors,) = [p for p in otel.points("gen_ai.client.operation.duration")
                 if p.attributes.get("error.type")]  # fmt: skip
    assert errors.count == 1
    rt.close()


def test_a_fault_in_telemetry_costs_spans_never_the_agents_journal(
    tmp_path: Path,
    otel: Recorded,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("a bug in telemetry")

    monkeypatch.setattr(ActivationTrace, "_observe", broken)
    rt = runtime(tmp_path)
    agent_id = scripted(rt, tmp_path, SCRIPT)
    assert rt.run(agent_id).state.status == "completed"
    assert rt.store.load_state(agent_id).steps_completed == 3
    assert "telemetry could not record event" in caplog.text
    assert otel.spans("execute_tool")  # the rest is still traced
    rt.close()
