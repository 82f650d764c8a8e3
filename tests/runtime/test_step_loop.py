"""The step loop: decisions, actions, and what the journal records, in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import Kind, Runtime, verify_chain
from stead.runtime.context import render
from stead.state import fold
from stead.testing import EventCapture, scripted
from stead.tools.base import as_tool
from stead.tools.builtin import BUILTINS

from . import crashy_tools
from .conftest import make_agent

TOOLS = {name: as_tool(f) for name, f in BUILTINS.items()} | {
    t.__name__: as_tool(t)
    for t in (
        crashy_tools.plain,
        crashy_tools.reconciled,
        crashy_tools.idem,
        crashy_tools.peek,
        crashy_tools.broken,
    )
}


@pytest.fixture(autouse=True)
def _reset_tools() -> None:
    crashy_tools.reset()


def kinds(rt: Runtime, agent_id: str) -> list[str]:
    return [e.kind for e in rt.store.read_events(agent_id)]


def test_a_full_run_completes_and_records_each_step(runtime: Runtime, tmp_path: Path) -> None:
    script: list[Any] = [
        {"tool": "write_file", "args": {"path": "src/app.py", "content": "print('hi')\n"}},
        {"remember": {"progress": "app.py rewritten"}},
        {"push_goal": {"id": "extra", "description": "one more"}},
        {"actions": [{"complete_goal": "rename"}, {"complete_goal": "extra"}]},
        {"finish": "renamed everywhere"},
    ]
    agent = make_agent(runtime, tmp_path, script, goals=[{"id": "rename"}])
    outcome = runtime.run(agent)
    state = outcome.state
    assert state.status == "completed"
    assert state.status_reason == "renamed everywhere"
    assert outcome.steps == 5 and state.steps_completed == 5
    assert state.memory == {"progress": "app.py rewritten"}
    assert [(g["id"], g["status"]) for g in state.goals] == [
        ("rename", "completed"),
        ("extra", "completed"),
    ]
    assert set(state.manifest) == {"src/app.py"}
    ws = runtime.workspace(agent, "default").root
    assert (ws / "src/app.py").read_text() == "print('hi')\n"
    assert kinds(runtime, agent)[:7] == [
        "agent_created",
        "grant_added",  # the spec's scope, recorded at creation
        "activation_started",
        "decision",
        "tool_intent",
        "tool_result",
        "step_completed",
    ]
    assert verify_chain(runtime.store.read_events(agent)).ok


def test_stored_state_is_the_fold_of_the_journal(runtime: Runtime, tmp_path: Path) -> None:
    script: list[Any] = [
        {
            "tools": [
                {"tool": "write_file", "args": {"path": "a", "content": "1"}},
                {"tool": "read_file", "args": {"path": "a"}},
            ]
        },
        {"remember": {"x": [1, 2]}},
        {"finish": None},
    ]
    agent = make_agent(runtime, tmp_path, script)
    runtime.run(agent)
    stored = runtime.store.load_state(agent)
    assert fold(runtime.store.read_events(agent)).to_json() == stored.to_json()
    for version in range(1, stored.version + 1):
        assert runtime.store.state_at(agent, version).version == version


def test_the_decision_is_committed_before_any_action(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(runtime, tmp_path, [{"tool": "plain"}, {"finish": "x"}])
    capture = EventCapture()
    runtime.run(agent, tools=TOOLS, on_commit=capture)
    first_commit_kinds = capture.kinds()
    assert first_commit_kinds.index("decision") < first_commit_kinds.index("tool_intent")
    intent = capture.of_kind(Kind.TOOL_INTENT)[0]
    decision = capture.of_kind(Kind.DECISION)[0]
    assert decision.seq < intent.seq
    assert [("plain", intent.data["idempotency_key"])] == crashy_tools.CALLS


def test_context_hash_matches_a_re_render_of_the_state_it_came_from(
    runtime: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(
        runtime, tmp_path, [{"remember": {"a": 1}}, {"remember": {"b": 2}}, {"finish": "x"}]
    )
    runtime.run(agent)
    record = runtime.store.get_record(agent)
    tools = runtime.tools_for(record)
    for ev in runtime.store.read_events(agent):
        if ev.kind == Kind.DECISION:
            before = runtime.store.state_at(agent, ev.seq - 1)
            again = render(before, record.spec, tools)
            assert again.hash == ev.data["context_hash"]
            assert render(before, record.spec, tools).text == again.text


def test_tool_errors_are_results_the_model_sees(runtime: Runtime, tmp_path: Path) -> None:
    script: list[Any] = [
        {"tool": "broken"},
        {"tool": "no_such_tool"},
        {"tool": "read_file", "args": {"path": "../../etc/passwd"}},
        {"tool": "read_file", "args": {"wrong": 1}},
        {"finish": "done anyway"},
    ]
    agent = make_agent(runtime, tmp_path, script)
    state = runtime.run(agent, tools=TOOLS).state
    errors = [c["error"] for c in state.recent_calls]
    assert state.status == "completed"
    assert "ValueError: the tool broke" in errors[0]
    assert "unknown tool 'no_such_tool'" in errors[1]
    assert "outside the agent's workspace" in errors[2]
    assert "has no argument 'wrong'" in errors[3]
    ctx = render(state, runtime.store.get_record(agent).spec, TOOLS)
    assert "the tool broke" in ctx.text


def test_waiting_for_input_then_a_message_wakes_it(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(
        runtime,
        tmp_path,
        [{"wait_for_input": "which file?"}, {"remember": {"asked": True}}, {"finish": "ok"}],
    )
    state = runtime.run(agent).state
    assert (state.status, state.waiting_for, state.status_reason) == (
        "waiting",
        "input",
        "which file?",
    )
    again = runtime.run(agent)
    assert again.steps == 0 and again.state.status == "waiting"
    state = runtime.send(agent, "app.py please")
    assert state.status == "running" and state.inbox == ["app.py please"]
    record = runtime.store.get_record(agent)
    assert "app.py please" in render(state, record.spec, runtime.tools_for(record)).text
    final = runtime.run(agent).state
    assert final.status == "completed" and final.inbox == []


def test_the_step_limit_fails_the_agent(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(
        runtime, tmp_path, [{"remember": {"i": n}} for n in range(10)], limits={"max_steps": 3}
    )
    state = runtime.run(agent).state
    assert state.status == "failed"
    assert "limit of 3 steps" in state.status_reason
    assert state.steps_completed == 3


def test_an_exhausted_script_needs_attention_and_loses_nothing(
    runtime: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(runtime, tmp_path, [{"remember": {"a": 1}}])
    state = runtime.run(agent).state
    assert state.status == "needs_attention"
    assert "all have been used" in state.status_reason
    assert state.memory == {"a": 1}
    longer = scripted([{"remember": {"a": 1}}, {"finish": "now"}])
    assert runtime.run(agent, model=longer).state.status == "completed"


def test_max_steps_per_run_pauses_without_losing_the_place(
    runtime: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(
        runtime, tmp_path, [{"remember": {"i": n}} for n in range(4)] + [{"finish": "x"}]
    )
    assert runtime.run(agent, max_steps=2).steps == 2
    assert runtime.store.load_state(agent).memory == {"i": 1}
    outcome = runtime.run(agent)
    assert outcome.steps == 3 and outcome.state.status == "completed"


def test_a_completed_agent_does_nothing_on_resume(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(runtime, tmp_path, [{"finish": "x"}])
    runtime.run(agent)
    version = runtime.store.load_state(agent).version
    assert runtime.run(agent).steps == 0
    assert runtime.store.load_state(agent).version == version


def test_the_workspace_is_seeded_from_the_spec_folder(runtime: Runtime, tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    (seed / "pkg").mkdir(parents=True)
    (seed / "pkg" / "m.py").write_text("x = 1\n")
    agent = make_agent(
        runtime,
        tmp_path,
        [{"tool": "read_file", "args": {"path": "pkg/m.py"}}, {"finish": "x"}],
        workspace="seed",
    )
    state = runtime.run(agent).state
    assert state.recent_calls[0]["output"] == "x = 1\n"
    assert list(runtime.store.state_at(agent, 1).manifest) == ["pkg/m.py"]


def test_shell_runs_in_the_workspace_and_times_out_whole(runtime: Runtime, tmp_path: Path) -> None:
    script: list[Any] = [
        {"tool": "shell", "args": {"command": "pwd; echo $HOME; echo hi > made.txt"}},
        {"tool": "shell", "args": {"command": "sleep 30 & sleep 30", "timeout": 0.5}},
        {"finish": "x"},
    ]
    agent = make_agent(runtime, tmp_path, script, tools=["shell"])
    state = runtime.run(agent).state
    first, second = state.recent_calls
    assert first["output"]["stdout"].split() == ["/workspace", "/workspace"]
    assert "made.txt" in state.manifest
    assert second["output"]["timed_out"] is True and second["output"]["exit_code"] is None


def test_the_state_keeps_a_clip_of_big_outputs_and_the_journal_all(
    runtime: Runtime, tmp_path: Path
) -> None:
    big = "x" * 50_000
    script: list[Any] = [
        {"tool": "write_file", "args": {"path": "big.txt", "content": big}},
        {"tool": "read_file", "args": {"path": "big.txt"}},
        {"finish": "x"},
    ]
    agent = make_agent(runtime, tmp_path, script)
    state = runtime.run(agent).state
    write, read = state.recent_calls
    assert write["args"].endswith("more characters]") and len(write["args"]) < 1000
    assert read["output"].startswith("xxx") and len(read["output"]) < 1000
    results = [e for e in runtime.store.read_events(agent) if e.kind == Kind.TOOL_RESULT]
    assert results[1].data["output"] == big
    assert results[0].data["args"]["content"] == big


def test_a_step_with_one_idempotent_call_is_one_commit(runtime: Runtime, tmp_path: Path) -> None:
    steps = 6
    script: list[Any] = [
        {"actions": [{"tool": "idem"}, {"remember": {"n": n}}]} for n in range(steps)
    ] + [{"finish": "x"}]
    agent = make_agent(runtime, tmp_path, script)
    commits: list[list[str]] = []
    runtime.run(agent, tools=TOOLS, on_commit=lambda evs: commits.append([e.kind for e in evs]))
    # activation start, then one commit per step (each carrying the step before's
    # result and end together with its own decision and intent), then the finish
    assert len(commits) == 1 + steps + 1
    for batch in commits[2:-1]:
        assert batch == [
            "tool_result",
            "memory_written",
            "step_completed",
            "decision",
            "tool_intent",
        ]


def test_an_effectful_result_is_committed_at_once(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(runtime, tmp_path, [{"tool": "plain"}, {"finish": "x"}])
    commits: list[list[str]] = []
    runtime.run(agent, tools=TOOLS, on_commit=lambda evs: commits.append([e.kind for e in evs]))
    assert ["tool_result"] in commits


def test_the_context_hash_is_the_digest_of_text_and_tool_schemas(
    runtime: Runtime, tmp_path: Path
) -> None:
    from stead.canonical import digest

    agent = make_agent(runtime, tmp_path, [{"tool": "list_files"}, {"finish": "x"}])
    state = runtime.run(agent).state
    record = runtime.store.get_record(agent)
    ctx = render(state, record.spec, runtime.tools_for(record))
    assert ctx.hash == digest({"text": ctx.text, "tools": ctx.tools})
