"""The scope ledger survives restarts exactly, and a damaged one stops the agent.

Authority is recomputed from the store at every call; these tests check that
what an agent may do never drifts across restarts and crashes except through
journaled grant, revocation and autonomy events, and that a store whose grants
were deleted or edited is refused rather than run with no scope or defaults.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, IntegrityError, Kind
from stead.governance.gate import judge
from stead.state import State, fold
from stead.store.codec import unpack

from .agents import RUNS, TOOLS, make_agent, runtime_at

GRID_TOOLS = ("deploy", "probe", "shell")
GRID_TARGETS = ("prod", "staging", "dev", "qa-1")
GRID_SIZES = (1, 5, 50)
CHANGING = {Kind.GRANT_ADDED, Kind.GRANT_REVOKED, Kind.AUTONOMY_CHANGED}


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def allowed_set(state: State, now: float) -> frozenset[tuple[str, str, int]]:
    """Every call on the fixed grid that the gate would let run without asking anyone."""
    out = set()
    for tool, target, size in itertools.product(GRID_TOOLS, GRID_TARGETS, GRID_SIZES):
        effect = "read_only" if tool == "probe" else "idempotent"
        verdict = judge(
            state,
            call_id="grid",
            tool=tool,
            effect=effect,
            args={"target": target, "size": size},
            now=now,
            policy=None,
        )
        if verdict.decision == "allow":
            out.add((tool, target, size))
    return frozenset(out)


class Crash(BaseException):
    """A worker dying inside a tool (its lease is left to expire)."""


def test_restarts_and_crashes_never_change_what_is_allowed(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    calls = [{"tool": "deploy", "args": {"target": t, "size": 1}} for t in GRID_TARGETS]
    script: list[Any] = [*calls, {"tool": "probe", "args": {"target": "prod"}}, *calls]
    agent = make_agent(
        rt,
        tmp_path,
        [*script, {"finish": "done"}],
        scope=[
            {"tool": "deploy", "args": {"target": {"glob": "qa-*"}, "size": {"max": 5}}},
            {"tool": "probe"},
        ],
    )
    rt.close()
    crash_at = {2, 5, 7}
    step = 0
    seen: list[tuple[int, frozenset[tuple[str, str, int]]]] = []
    while True:
        rt = runtime_at(tmp_path, clock)  # a new worker for every step
        state = rt.store.load_state(agent)
        seen.append((state.version, allowed_set(state, clock.now())))
        if state.is_final:
            rt.close()
            break
        if step == 3:
            rt.grant(agent, {"tool": "deploy", "args": {"target": {"one_of": ["staging"]}}})
        if step == 6:
            (deploy_grant,) = [g for g in state.grants.values() if g["tool"] == "deploy"][:1]
            rt.revoke(agent, deploy_grant["id"], reason="narrowing")
        tools = dict(TOOLS)
        if step in crash_at:

            def dying(**_: Any) -> None:
                raise Crash

            from stead.tools.base import make_tool

            tools["deploy"] = make_tool(dying, name="deploy", effect="idempotent")
        try:
            rt.run(agent, tools=tools, max_steps=1)
        except Crash:
            clock.advance(11)  # the dead worker's lease runs out
        rt.close()
        clock.advance(1)
        step += 1
        assert step < 40, "the agent did not finish"

    events = list(runtime_at(tmp_path, clock).store.read_events(agent))
    # the allowed set stored after each restart equals the fold of the journal up
    # to that version, and changes only where a grant, revocation or autonomy
    # change lies between two versions
    for (v1, a1), (v2, a2) in itertools.pairwise(seen):
        assert allowed_set(fold(e for e in events if e.seq <= v2), clock.now()) == a2
        if a1 != a2:
            between = {e.kind for e in events if v1 < e.seq <= v2}
            assert between & CHANGING, f"allowed set changed between {v1} and {v2} by {between}"
    assert len({a for _, a in seen}) >= 3  # the grant and the revocation both showed
    ran = [r["target"] for r in RUNS if r["tool"] == "deploy"]
    assert set(ran) <= {"qa-1", "staging"}  # nothing outside what was granted ever ran


def _corrupt(db: Path, sql: str, *params: Any) -> None:
    con = sqlite3.connect(db)
    with con:
        con.execute(sql, params)
    con.close()


def _agent_with_grant(tmp_path: Path) -> tuple[FakeClock, str]:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "qa-1"}}, {"finish": "done"}],
        scope=[{"tool": "deploy", "args": {"target": {"glob": "qa-*"}}}],
    )
    rt.close()
    return clock, agent


def _state_json(db: Path, agent: str) -> dict[str, Any]:
    con = sqlite3.connect(db)
    (text,) = con.execute("SELECT state FROM agents WHERE agent_id = ?", (agent,)).fetchone()
    con.close()
    loaded: dict[str, Any] = json.loads(unpack(text, "the state row"))
    return loaded


def _refuses(tmp_path: Path, clock: FakeClock, agent: str, match: str) -> None:
    rt = runtime_at(tmp_path, clock)
    before = [e.hash for e in rt.store.read_events(agent)]
    with pytest.raises(IntegrityError, match=match):
        rt.run(agent, tools=TOOLS)
    assert RUNS == []
    assert [e.hash for e in rt.store.read_events(agent)] == before  # nothing was written
    lease = rt.store.get_lease(agent)
    assert lease is None or not lease.live(clock.now())  # and the lease was given back
    rt.close()


def test_grants_deleted_from_the_state_stop_the_agent(tmp_path: Path) -> None:
    clock, agent = _agent_with_grant(tmp_path)
    db = tmp_path / "s.db"
    state = _state_json(db, agent)
    state["grants"] = {}
    _corrupt(db, "UPDATE agents SET state = ? WHERE agent_id = ?", json.dumps(state), agent)
    _refuses(tmp_path, clock, agent, "missing from the state")


def test_a_grant_widened_in_the_state_stops_the_agent(tmp_path: Path) -> None:
    clock, agent = _agent_with_grant(tmp_path)
    db = tmp_path / "s.db"
    state = _state_json(db, agent)
    for g in state["grants"].values():
        g["args"] = {}
    _corrupt(db, "UPDATE agents SET state = ? WHERE agent_id = ?", json.dumps(state), agent)
    _refuses(tmp_path, clock, agent, "differs between the state and the journal")


def test_a_grant_event_deleted_from_the_journal_stops_the_agent(tmp_path: Path) -> None:
    clock, agent = _agent_with_grant(tmp_path)
    _corrupt(
        tmp_path / "s.db",
        "DELETE FROM events WHERE agent_id = ? AND kind = ?",
        agent,
        Kind.GRANT_ADDED.value,
    )
    _refuses(tmp_path, clock, agent, "not in the journal")


def test_a_grant_event_edited_in_the_journal_stops_the_agent(tmp_path: Path) -> None:
    clock, agent = _agent_with_grant(tmp_path)
    db = tmp_path / "s.db"
    con = sqlite3.connect(db)
    (data,) = con.execute(
        "SELECT data FROM events WHERE agent_id = ? AND kind = ?", (agent, "grant_added")
    ).fetchone()
    con.close()
    _corrupt(
        db,
        "UPDATE events SET data = ? WHERE agent_id = ? AND kind = ?",
        unpack(data, "the grant event").replace('"qa-*"', '"*"'),
        agent,
        "grant_added",
    )
    _refuses(tmp_path, clock, agent, "does not match its hash")


def test_a_grant_row_added_to_the_state_stops_the_agent(tmp_path: Path) -> None:
    clock, agent = _agent_with_grant(tmp_path)
    db = tmp_path / "s.db"
    state = _state_json(db, agent)
    state["grants"]["gr_forged"] = {**next(iter(state["grants"].values())), "id": "gr_forged"}
    _corrupt(db, "UPDATE agents SET state = ? WHERE agent_id = ?", json.dumps(state), agent)
    _refuses(tmp_path, clock, agent, "gr_forged is in the state but not in the journal")


def test_an_intact_ledger_runs(tmp_path: Path) -> None:
    clock, agent = _agent_with_grant(tmp_path)
    rt = runtime_at(tmp_path, clock)
    assert rt.run(agent, tools=TOOLS).state.status == "completed"
    assert RUNS == [{"tool": "deploy", "target": "qa-1", "size": 1}]
    rt.close()
