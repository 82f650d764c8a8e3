"""Autonomy levels, and an agent trying to widen its own authority."""

from __future__ import annotations

from pathlib import Path

import pytest

from stead import FakeClock, Kind
from stead.errors import GovernanceError, SpecError

from .agents import RUNS, make_agent, requested, run, runtime_at


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


DEPLOY = {"tool": "deploy", "args": {"target": "prod"}}
PROBE = {"tool": "probe", "args": {"target": "prod"}}


def test_observe_runs_only_read_only_tools_and_records_the_refusal(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt, tmp_path, [PROBE, DEPLOY, {"finish": "done"}], autonomy="observe", tools=[]
    )
    state = run(rt, agent).state
    assert [r["tool"] for r in RUNS] == ["probe"]
    probe, deploy = state.recent_calls
    assert probe["ok"] and not deploy["ok"]
    assert "observe" in deploy["error"]
    rt.close()


def test_advise_records_a_proposal_that_a_person_can_accept(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock(), person="bob@ops")
    agent = make_agent(rt, tmp_path, [DEPLOY, {"finish": "done"}], autonomy="advise", tools=[])
    state = run(rt, agent).state
    assert state.status == "completed" and RUNS == []
    (proposal,) = state.proposals.values()
    assert "proposal" in state.recent_calls[0]["error"]
    from stead.tools.base import as_tool

    from .agents import deploy

    rt.tools_for = lambda record: {"deploy": as_tool(deploy)}  # type: ignore[method-assign]
    with pytest.raises(GovernanceError, match="closed"):
        rt.set_autonomy(agent, "act_autonomously")  # a completed agent's authority is closed
    after = rt.accept(agent, proposal["proposal_id"])
    assert RUNS == [{"tool": "deploy", "target": "prod", "size": 1}]
    assert after.proposals == {}
    events = list(rt.store.read_events(agent))
    (accepted,) = [e for e in events if e.kind == Kind.PROPOSAL_ACCEPTED]
    assert accepted.data["by"] == "bob@ops"
    (intent,) = [e for e in events if e.kind == Kind.TOOL_INTENT]
    assert intent.data["verdict"]["authority"] == "bob@ops"
    assert intent.data["call_id"] == proposal["proposal_id"]
    rt.close()


def test_a_per_tool_override_beats_the_agent_level(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [DEPLOY, {"finish": "done"}],
        tools=[],
        tool_autonomy={"deploy": "act_with_approval"},
    )
    assert run(rt, agent).state.status == "waiting"
    assert len(requested(rt, agent)) == 1
    rt.set_autonomy(agent, "act_autonomously", tool="deploy", reason="trusted now")
    state = rt.store.load_state(agent)
    assert state.tool_autonomy == {"deploy": "act_autonomously"}
    (changed,) = [e for e in rt.store.read_events(agent) if e.kind == Kind.AUTONOMY_CHANGED]
    assert changed.data["by"] == "alice@test" and changed.data["reason"] == "trusted now"
    rt.close()


def test_a_script_with_an_unknown_action_is_refused_when_loaded(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    with pytest.raises(SpecError, match="unknown action 'sudo'"):
        make_agent(rt, tmp_path, [{"sudo": True}])
    rt.close()


def test_out_of_scope_calls_are_refused_or_asked_as_the_spec_says(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    refusing = make_agent(rt, tmp_path, [DEPLOY, {"finish": "done"}], scope=[{"tool": "probe"}])
    state = run(rt, refusing).state
    assert RUNS == [] and "out of scope" in state.recent_calls[0]["error"]
    asking = make_agent(
        rt, tmp_path, [DEPLOY, {"finish": "done"}], scope=[{"tool": "probe"}], out_of_scope="ask"
    )
    assert run(rt, asking).state.status == "waiting"
    (asked,) = requested(rt, asking)
    assert "out of scope" in asked["reason"]
    rt.approve(asked["approval_id"])
    assert run(rt, asking).state.status == "completed"
    assert len(RUNS) == 1
    rt.close()


def test_max_uses_and_validity_windows_are_enforced_at_execution(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [DEPLOY, DEPLOY, DEPLOY, {"finish": "done"}],
        scope=[{"tool": "deploy", "max_uses": 2, "valid_for": 3600}],
    )
    state = run(rt, agent).state
    assert len(RUNS) == 2
    assert "used all 2 times" in state.recent_calls[2]["error"]
    late = make_agent(
        rt, tmp_path, [DEPLOY, {"finish": "x"}], scope=[{"tool": "deploy", "valid_for": 60}]
    )
    clock.advance(61)
    state = run(rt, late).state
    assert len(RUNS) == 2 and "expired" in state.recent_calls[0]["error"]
    rt.close()
