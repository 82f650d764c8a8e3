"""What wakes a hibernated agent besides a message, and a snapshot damaged in the store.

An approval wakes an agent that hibernated while it waited for one, and the
approved call runs once; an approval that lapsed while the agent slept is not
honoured after the wake. A snapshot row whose manifest was edited in the
database is refused by its checksum, and nothing changes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from stead import FakeClock, Kind
from stead.errors import ArchiveError
from stead.snapshots.hibernation import hibernate, restore

from ..governance.agents import RUNS, make_agent, requested, run, runtime_at

MINUTE = 60.0
DEPLOY = [{"tool": "deploy", "args": {"target": "prod"}}, {"finish": "done"}]


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def test_an_approval_wakes_a_hibernated_agent_and_the_call_runs_once(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt, tmp_path, DEPLOY, autonomy="act_with_approval", scope=[{"tool": "deploy"}]
    )
    assert run(rt, agent).state.status == "waiting"
    snap = hibernate(rt, agent)
    slept = rt.store.load_state(agent)
    assert slept.status == "hibernated" and slept.waiting_for == "approval"
    assert rt.store.agents_to_run(clock.now()) == []
    rt.close()  # nothing of the worker survives

    clock.advance(3 * MINUTE)
    rt = runtime_at(tmp_path, clock)
    (asked,) = requested(rt, agent)
    rt.approve(asked["approval_id"], valid_for=15 * MINUTE)
    assert rt.store.agents_to_run(clock.now()) == [agent]
    assert run(rt, agent).state.status == "completed"
    assert RUNS == [{"tool": "deploy", "target": "prod", "size": 1}]
    assert rt.store.get_snapshot(snap.snapshot_id).consumed
    assert (rt.workspace(agent, "default").root).is_dir()
    rt.close()


def test_an_approval_that_lapsed_while_the_agent_slept_is_not_honoured(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt, tmp_path, DEPLOY, autonomy="act_with_approval", scope=[{"tool": "deploy"}]
    )
    run(rt, agent)
    hibernate(rt, agent)
    (asked,) = requested(rt, agent)
    rt.approve(asked["approval_id"], valid_for=15 * MINUTE)  # wakes it
    rt.close()

    clock.advance(16 * MINUTE)  # no worker ran it in time
    rt = runtime_at(tmp_path, clock)
    state = run(rt, agent).state
    assert RUNS == []
    assert state.status == "waiting" and state.hibernated is None  # restored, asks again
    (fresh,) = requested(rt, agent)
    assert fresh["approval_id"] != asked["approval_id"]
    lapsed = [e for e in rt.store.read_events(agent) if e.kind == Kind.APPROVAL_LAPSED]
    assert [e.data["approval_id"] for e in lapsed] == [asked["approval_id"]]
    rt.close()


def test_a_snapshot_whose_manifest_was_edited_in_the_store_is_refused(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"tool": "write_file", "args": {"path": "a.txt", "content": "alpha\n"}},
            {"wait_for_input": "next?"},
            {"finish": "done"},
        ],
        tools=["write_file"],
    )
    rt.run(agent)
    snap = hibernate(rt, agent)
    rt.close()
    db = sqlite3.connect(tmp_path / "s.db")
    with db:
        db.execute(
            "UPDATE snapshots SET manifest = ? WHERE snapshot_id = ?",
            ('{"a.txt": "' + "0" * 64 + '"}', snap.snapshot_id),
        )
    db.close()

    rt = runtime_at(tmp_path, clock)
    before = [e.kind for e in rt.store.read_events(agent)]
    with pytest.raises(ArchiveError, match="manifest does not match its checksum"):
        restore(rt, snap.snapshot_id)
    assert [e.kind for e in rt.store.read_events(agent)] == before
    assert not rt.store.get_snapshot(snap.snapshot_id).consumed
    assert rt.store.load_state(agent).status == "hibernated"
    assert not rt.workspace(agent, "default").root.exists()
    rt.close()
