"""Schedules across a fork, an export and import, and a move: a schedule wakes the
agent it was made for, never a copy; a moved agent's schedule ends at its next due
time, and the person makes it again on the imported agent."""

from __future__ import annotations

import os
from pathlib import Path

from stead import FakeClock, Kind, Runtime
from stead.schedules import Schedules, fire_due
from stead.store.memory import MemoryStore

from ..runtime.conftest import make_agent

HOUR = 3600.0


def test_forks_and_imports_carry_no_schedule_and_a_move_ends_it(tmp_path: Path) -> None:
    rt = Runtime(MemoryStore(), tmp_path / "data", clock=FakeClock(), secret_key=os.urandom(32))
    agent = make_agent(rt, tmp_path, [{"wait_for_input": "?"}] * 5)
    rt.run(agent)
    made = Schedules(rt).add(agent_id=agent, every="1h", message="go")
    fork = rt.fork(agent).agent_id
    assert rt.store.load_state(fork).schedules == {}
    rt.export(agent, tmp_path / "a.stead", move=True)
    imported = rt.import_archive(tmp_path / "a.stead").agent_id
    assert rt.store.load_state(imported).schedules == {}
    assert rt.store.load_state(agent).status == "moved"
    clock(rt).advance(HOUR)
    report = fire_due(rt)
    assert report.delivered == [] and "moved" in report.failed[0][2]
    for other in (fork, imported):
        assert not [e for e in rt.store.read_events(other) if e.kind == Kind.SCHEDULE_FIRED]
    stored = Schedules(rt).get(made.schedule_id)
    assert stored.paused and stored.next_due is None
    again = Schedules(rt).add(agent_id=imported, every="1h", message="go")
    clock(rt).advance(HOUR)
    assert [d[2] for d in fire_due(rt).delivered] == [imported]
    assert again.agent_id == imported


def clock(rt: Runtime) -> FakeClock:
    assert isinstance(rt.clock, FakeClock)
    return rt.clock
