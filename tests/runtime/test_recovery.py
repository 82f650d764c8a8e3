"""Recovery after a worker dies mid-step: by effect class, and of the workspace.

A worker's death is simulated by a BaseException raised inside a tool (the
chaos tests kill real processes); the dead activation's lease is left to expire
on the fake clock, as a dead worker's lease would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import Kind, LeaseHeld, ResolveError, Runtime, verify_chain
from stead.tools.base import as_tool
from stead.tools.builtin import BUILTINS

from . import crashy_tools
from .conftest import expire_lease, make_agent
from .crashy_tools import WorkerDied

TOOLS = {name: as_tool(f) for name, f in BUILTINS.items()} | {
    t.__name__: as_tool(t)
    for t in (crashy_tools.plain, crashy_tools.reconciled, crashy_tools.idem, crashy_tools.peek)
}


@pytest.fixture(autouse=True)
def _reset_tools() -> None:
    crashy_tools.reset()


class CountingModel:
    """Wraps a scripted model and counts how often it is asked."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.asked = inner, "counting", 0

    def decide(self, context: Any) -> Any:
        self.asked += 1
        return self.inner.decide(context)


def die_in(rt: Runtime, agent: str, tool: str, **kw: Any) -> None:
    """Run until ``tool`` "kills the worker"; a dead worker never releases its lease."""
    crashy_tools.DIE_IN.add(tool)
    release = rt.store.release_lease
    rt.store.release_lease = lambda lease: None  # type: ignore[method-assign]
    try:
        with pytest.raises(WorkerDied):
            rt.run(agent, tools=TOOLS, **kw)
    finally:
        rt.store.release_lease = release  # type: ignore[method-assign]


def crash_in(rt: Runtime, agent: str, tool: str) -> None:
    die_in(rt, agent, tool)
    expire_lease(rt)


def events(rt: Runtime, agent: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent) if e.kind == kind]


SCRIPT: list[Any] = [{"remember": {"before": True}}, {"tool": "TOOL"}, {"finish": "ok"}]


def script_for(tool: str) -> list[Any]:
    return [{"tool": tool} if a == {"tool": "TOOL"} else a for a in SCRIPT]


def test_a_live_lease_keeps_a_second_worker_out(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(runtime, tmp_path, script_for("plain"))
    die_in(runtime, agent, "plain")
    version = runtime.store.load_state(agent).version
    with pytest.raises(LeaseHeld, match="being run by worker"):
        runtime.run(agent, tools=TOOLS)
    assert runtime.store.load_state(agent).version == version
    expire_lease(runtime)
    assert runtime.run(agent, tools=TOOLS).state.status == "needs_attention"


def test_effectful_without_reconcile_becomes_outcome_unknown(
    runtime: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(runtime, tmp_path, script_for("plain"))
    crash_in(runtime, agent, "plain")
    state = runtime.run(agent, tools=TOOLS).state
    assert state.status == "needs_attention"
    (call_id,) = state.unknown
    assert state.unknown[call_id]["tool"] == "plain"
    assert "no reconcile hook" in state.status_reason
    assert [c[0] for c in crashy_tools.CALLS] == ["plain"], "never silently re-run"
    # a resume without a person's decision changes nothing
    assert runtime.run(agent, tools=TOOLS).state.status == "needs_attention"
    assert [c[0] for c in crashy_tools.CALLS] == ["plain"]


@pytest.mark.parametrize(
    ("resolution", "runs", "ok"), [("done", 1, True), ("retry", 2, True), ("abort", 1, False)]
)
def test_a_person_resolves_an_unknown_outcome(
    runtime: Runtime, tmp_path: Path, resolution: str, runs: int, ok: bool
) -> None:
    agent = make_agent(runtime, tmp_path, script_for("plain"))
    crash_in(runtime, agent, "plain")
    (call_id,) = runtime.run(agent, tools=TOOLS).state.unknown
    state = runtime.resolve(agent, call_id, resolution)
    assert state.unknown == {} and state.status == "running"
    final = runtime.run(agent, tools=TOOLS).state
    assert final.status == "completed"
    assert [c[0] for c in crashy_tools.CALLS] == ["plain"] * runs
    call = next(c for c in final.recent_calls if c["call_id"] == call_id)
    assert call["ok"] is ok
    resolved = events(runtime, agent, Kind.CALL_RESOLVED)
    assert [r["resolution"] for r in resolved] == [resolution]


def test_resolving_a_call_that_is_not_unknown_is_refused(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(runtime, tmp_path, script_for("plain"))
    crash_in(runtime, agent, "plain")
    runtime.run(agent, tools=TOOLS)
    version = runtime.store.load_state(agent).version
    with pytest.raises(ResolveError, match="not awaiting a decision"):
        runtime.resolve(agent, "call_nope", "done")
    with pytest.raises(ResolveError, match="must be one of"):
        runtime.resolve(agent, "call_nope", "maybe")
    assert runtime.store.load_state(agent).version == version


def test_idempotent_runs_again_with_the_same_key(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(runtime, tmp_path, script_for("idem"))
    crash_in(runtime, agent, "idem")
    state = runtime.run(agent, tools=TOOLS).state
    assert state.status == "completed"
    (first, second) = crashy_tools.CALLS
    assert first == second, "same tool, same idempotency key"
    results = events(runtime, agent, Kind.TOOL_RESULT)
    assert [r["rerun"] for r in results] == [True]
    assert len(events(runtime, agent, Kind.TOOL_INTENT)) == 1


@pytest.mark.parametrize(
    ("answer", "runs", "status"),
    [("done", 1, "completed"), ("not_done", 2, "completed"), ("unknown", 1, "needs_attention")],
)
def test_reconcile_decides_what_happens(
    runtime: Runtime, tmp_path: Path, answer: str, runs: int, status: str
) -> None:
    agent = make_agent(runtime, tmp_path, script_for("reconciled"))
    crash_in(runtime, agent, "reconciled")
    crashy_tools.RECONCILE_ANSWER["answer"] = answer
    state = runtime.run(agent, tools=TOOLS).state
    assert state.status == status
    assert len(crashy_tools.CALLS) == runs
    assert [r["verdict"] for r in events(runtime, agent, Kind.RECONCILED)] == [answer]
    if answer == "done":
        assert state.recent_calls[-1]["output"] == {"found": True}


def test_the_decision_in_flight_is_not_asked_again(runtime: Runtime, tmp_path: Path) -> None:
    from stead.models.registry import model_for

    agent = make_agent(runtime, tmp_path, script_for("idem"))
    model = CountingModel(model_for(runtime.store.get_record(agent).spec))
    die_in(runtime, agent, "idem", model=model)
    assert model.asked == 2
    expire_lease(runtime)
    runtime.run(agent, tools=TOOLS, model=model)
    assert model.asked == 3, "only the finish step asked the model after the crash"
    assert len(events(runtime, agent, Kind.DECISION)) == 3


def test_a_half_written_workspace_is_restored(runtime: Runtime, tmp_path: Path) -> None:
    script: list[Any] = [
        {"tool": "write_file", "args": {"path": "keep.txt", "content": "committed"}},
        {"tool": "plain"},
        {"finish": "x"},
    ]
    agent = make_agent(runtime, tmp_path, script)
    crash_in(runtime, agent, "plain")
    ws = runtime.workspace(agent, "default").root
    (ws / "keep.txt").write_text("scribbled by the dying step")
    (ws / "stray.txt").write_text("new file")
    assert (ws / "plain.out").exists()
    runtime.run(agent, tools=TOOLS)
    assert (ws / "keep.txt").read_text() == "committed"
    assert not (ws / "stray.txt").exists()
    assert not (ws / "plain.out").exists(), "the interrupted call's file is rolled back"
    (restored,) = events(runtime, agent, Kind.WORKSPACE_RESTORED)
    assert restored["paths"] == ["keep.txt", "plain.out", "stray.txt"]
    kinds = [e.kind for e in runtime.store.read_events(agent)]
    second_activation = len(kinds) - kinds[::-1].index("activation_started") - 1
    assert kinds[second_activation - 1] == "workspace_restored"


def test_a_deleted_workspace_is_rebuilt_from_blobs(runtime: Runtime, tmp_path: Path) -> None:
    import shutil

    script: list[Any] = [
        {"tool": "write_file", "args": {"path": "d/a.txt", "content": "A"}},
        {"wait_for_input": "go?"},
        {"tool": "read_file", "args": {"path": "d/a.txt"}},
        {"finish": "x"},
    ]
    agent = make_agent(runtime, tmp_path, script)
    runtime.run(agent)
    shutil.rmtree(runtime.workspace(agent, "default").root)
    runtime.send(agent, "go")
    state = runtime.run(agent).state
    assert state.status == "completed"
    assert state.recent_calls[-1]["output"] == "A"


def test_the_chain_verifies_after_crashes_and_resolutions(runtime: Runtime, tmp_path: Path) -> None:
    agent = make_agent(runtime, tmp_path, [{"tool": "plain"}, {"tool": "idem"}, {"finish": "x"}])
    crash_in(runtime, agent, "plain")
    (call_id,) = runtime.run(agent, tools=TOOLS).state.unknown
    runtime.resolve(agent, call_id, "done")
    crash_in(runtime, agent, "idem")
    assert runtime.run(agent, tools=TOOLS).state.status == "completed"
    report = verify_chain(runtime.store.read_events(agent))
    assert report.ok and report.head_hash == runtime.store.load_state(agent).head_hash
    epochs = [e.epoch for e in runtime.store.read_events(agent)]
    assert epochs == sorted(epochs), "every later activation writes under a higher epoch"
