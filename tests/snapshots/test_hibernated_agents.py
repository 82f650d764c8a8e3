"""What people do to agents that wait or sleep: clear, wake, export, hibernate again.

A monitor's suspension of a waiting agent, once cleared, puts it back to its
wait (input, timer or approval), awake or asleep, unless what it waited for
came meanwhile. Restoring an agent whose timer came due while it slept fires
the timer. An exported agent with a call of unknown outcome is refused before
anything is written, with the command that settles it. A worker hibernates
agents that wait for a person too, and skips one it cannot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.cli.common import describe_stop
from stead.errors import UsageError
from stead.journal import NewEvent
from stead.snapshots.hibernation import hibernate, restore, wake
from stead.store.sqlite import SqliteStore
from stead.workers.threaded import Worker

from ..governance.agents import TOOLS as GOVERNED_TOOLS
from ..governance.agents import VAULT_KEY
from ..runtime.conftest import make_agent

NOTE = {"tool": "write_file", "args": {"path": "n.txt", "content": "note\n"}}
ASKS = [NOTE, {"wait_for_input": "more?"}, {"finish": "done"}]
SLEEPS = [NOTE, {"wait": {"seconds": 3600, "reason": "look again in an hour"}}, {"finish": "done"}]


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    runtime = Runtime(
        SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock(), secret_key=VAULT_KEY
    )
    yield runtime  # type: ignore[misc]
    runtime.close()


def note_seq(rt: Runtime, agent: str) -> int:
    return next(
        e.seq
        for e in rt.store.read_events(agent)
        if e.kind == Kind.TOOL_RESULT and e.data["tool"] == "write_file"
    )


@pytest.mark.parametrize("asleep", [False, True], ids=["awake", "asleep"])
def test_a_cleared_suspension_puts_a_waiting_agent_back_to_its_wait(
    rt: Runtime, tmp_path: Path, asleep: bool
) -> None:
    agent = make_agent(rt, tmp_path, ASKS)
    assert rt.run(agent).state.status == "waiting"
    if asleep:
        hibernate(rt, agent)
    rt.quarantine(agent, note_seq(rt, agent), "looks wrong")
    suspended = rt.store.load_state(agent)
    (vid,) = suspended.violations
    assert any(f"stead clear {agent} {vid}" in line for line in describe_stop(suspended))
    state = clear_the_violation(rt, agent)
    if asleep:
        assert state.status == "hibernated" and state.hibernated is not None
        assert (state.hibernated["status"], state.hibernated["status_reason"]) == (
            "waiting",
            "more?",
        )
    else:
        assert (state.status, state.status_reason) == ("waiting", "more?")
    assert state.waiting_for == "input"
    assert rt.run(agent).steps == 0  # nothing runs past the wait
    rt.send(agent, "yes")
    assert rt.run(agent).state.status == "completed"


def clear_the_violation(rt: Runtime, agent: str) -> Any:
    """Clear the one open violation as a person would (the `stead clear` event)."""
    (vid,) = rt.store.load_state(agent).violations
    return rt.append_as_person(
        agent,
        lambda s: [
            NewEvent(Kind.VIOLATION_CLEARED, {"violation_id": vid, "by": "p", "reason": "ok"})
        ],
    )


def test_input_that_came_during_the_suspension_lets_it_go_on_once_cleared(
    rt: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(rt, tmp_path, ASKS)
    rt.run(agent)
    rt.quarantine(agent, note_seq(rt, agent), "looks wrong")
    rt.send(agent, "yes")
    assert rt.store.load_state(agent).status == "needs_attention"
    state = clear_the_violation(rt, agent)
    assert state.status == "running"
    assert rt.run(agent).state.status == "completed"


def test_a_cleared_suspension_keeps_a_sleeping_agent_on_its_timer(
    rt: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(rt, tmp_path, SLEEPS)
    assert rt.run(agent).state.status == "waiting"
    hibernate(rt, agent)
    rt.quarantine(agent, note_seq(rt, agent), "looks wrong")
    state = clear_the_violation(rt, agent)
    assert state.status == "hibernated" and state.timer is not None
    assert rt.store.agents_to_run(rt.clock.now()) == []  # not before the timer is due
    assert rt.run(agent).steps == 0
    assert Kind.TIMER_FIRED not in [e.kind for e in rt.store.read_events(agent)]


def test_restoring_an_agent_whose_timer_came_due_fires_it(rt: Runtime, tmp_path: Path) -> None:
    agent = make_agent(rt, tmp_path, SLEEPS)
    rt.run(agent)
    hibernate(rt, agent)
    rt.clock.advance(3601)  # type: ignore[attr-defined]
    state = wake(rt, agent)
    assert state.status == "running" and state.timer is None
    assert [e.kind for e in rt.store.read_events(agent)][-2:] == [Kind.RESTORED, Kind.TIMER_FIRED]
    assert rt.run(agent).state.status == "completed"


def test_a_woken_agent_is_not_hibernated_again_before_its_restore(
    rt: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(rt, tmp_path, ASKS)
    rt.run(agent)
    snap = hibernate(rt, agent)
    rt.send(agent, "yes")  # woken: the next run restores it
    with pytest.raises(UsageError, match=f"snapshot {snap.snapshot_id} waits to be restored"):
        hibernate(rt, agent)
    assert len(rt.store.list_snapshots(agent)) == 1
    assert rt.run(agent).state.status == "completed"


def test_the_snapshot_of_a_moved_agent_is_not_restored_here(rt: Runtime, tmp_path: Path) -> None:
    agent = make_agent(rt, tmp_path, ASKS)
    rt.run(agent)
    snap = hibernate(rt, agent)
    rt.export(agent, tmp_path / "a.stead", move=True)
    with pytest.raises(UsageError, match="moved out of this store"):
        restore(rt, snap.snapshot_id)


def test_an_agent_with_an_unknown_outcome_is_not_exported_and_nothing_is_written(
    rt: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(rt, tmp_path, ASKS)
    rt.run(agent)
    rt.append_as_person(
        agent,
        lambda s: [NewEvent(Kind.OUTCOME_UNKNOWN, {"call_id": "call_x", "reason": "cut off"})],
    )
    assert rt.store.load_state(agent).unknown
    before = [e.kind for e in rt.store.read_events(agent)]
    with pytest.raises(UsageError, match=f"stead resolve {agent} CALL"):
        rt.export(agent, tmp_path / "a.stead")
    assert [e.kind for e in rt.store.read_events(agent)] == before  # no key was minted
    assert not (tmp_path / "a.stead").exists()


def test_a_worker_hibernates_agents_that_wait_for_a_person(rt: Runtime, tmp_path: Path) -> None:
    agent = make_agent(rt, tmp_path, ASKS)
    rt.run(agent)
    rt.quarantine(agent, note_seq(rt, agent), "looks wrong")
    woken = make_agent(rt, tmp_path, ASKS, name="woken")
    rt.run(woken)
    hibernate(rt, woken)
    rt.send(woken, "yes")
    rt.quarantine(woken, note_seq(rt, woken), "stop it before it runs")
    rt.clock.advance(600)  # type: ignore[attr-defined]
    report = Worker(rt, hibernate_after=300).run_until_idle()
    assert agent in report.hibernated and woken not in report.hibernated
    assert report.errors == {}
    slept = rt.store.load_state(agent)
    assert slept.status == "hibernated" and slept.hibernated is not None
    assert slept.hibernated["status"] == "needs_attention"
    lines = describe_stop(slept)
    assert any("asleep while needs_attention" in line for line in lines)
    assert any(f"stead clear {agent}" in line for line in lines)
    assert not any("stead send" in line for line in lines)


def test_a_cleared_suspension_keeps_an_agent_waiting_on_its_approval(tmp_path: Path) -> None:
    from ..governance.agents import RUNS, requested, runtime_at
    from ..governance.agents import make_agent as make_governed

    RUNS.clear()
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_governed(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "prod"}}, {"finish": "done"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    rt.run(agent, tools=GOVERNED_TOOLS)
    (asked,) = requested(rt, agent)
    hibernate(rt, agent)
    first = next(e.seq for e in rt.store.read_events(agent) if e.kind == Kind.DECISION)
    rt.quarantine(agent, first, "check the target")
    # still asked for while suspended, and the same one after the clear
    assert [a["approval_id"] for _, a in rt.pending_approvals()] == [asked["approval_id"]]
    state = clear_the_violation(rt, agent)
    assert state.status == "hibernated" and state.waiting_for == "approval"
    assert rt.run(agent, tools=GOVERNED_TOOLS).steps == 0 and RUNS == []
    rt.approve(asked["approval_id"], valid_for=900)
    assert rt.run(agent, tools=GOVERNED_TOOLS).state.status == "completed"
    assert len(RUNS) == 1 and len(requested(rt, agent)) == 0
    rt.close()


def test_an_agent_waiting_on_an_approval_is_exported_once_it_is_answered(
    tmp_path: Path,
) -> None:
    from ..governance.agents import make_agent as make_governed
    from ..governance.agents import requested, runtime_at

    rt = runtime_at(tmp_path, FakeClock())
    agent = make_governed(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "prod"}}, {"wait_for_input": "next?"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    rt.run(agent, tools=GOVERNED_TOOLS)
    (asked,) = requested(rt, agent)
    with pytest.raises(UsageError, match=f"for approval {asked['approval_id']}; answer it"):
        rt.export(agent, tmp_path / "a.stead", move=True)
    assert rt.store.load_state(agent).status == "waiting"
    rt.approve(asked["approval_id"], valid_for=900)
    rt.run(agent, tools=GOVERNED_TOOLS)
    rt.export(agent, tmp_path / "a.stead", move=True)
    assert rt.store.load_state(agent).status == "moved"
    rt.close()
