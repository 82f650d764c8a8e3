"""Hibernate and wake: an idle agent holds no workspace, and wakes on any event, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from stead import FakeClock, Kind, Runtime
from stead.errors import ArchiveError, SnapshotConsumed, UsageError
from stead.snapshots.hibernation import hibernate, restore, wake
from stead.store.memory import MemoryStore
from stead.store.sqlite import SqliteStore
from stead.workers.threaded import Worker

from ..runtime.conftest import make_agent

WAITS = [
    {"tool": "write_file", "args": {"path": "notes/a.txt", "content": "alpha\n" * 100}},
    {"wait_for_input": "what next?"},
    {"tool": "read_file", "args": {"path": "notes/a.txt"}},
    {"finish": "done"},
]


@pytest.fixture(params=["memory", "sqlite"])
def rt(request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
    runtime = Runtime(store, tmp_path / "data", clock=FakeClock())
    yield runtime  # type: ignore[misc]
    runtime.close()


def kinds(rt: Runtime, agent: str) -> list[str]:
    return [e.kind for e in rt.store.read_events(agent)]


def test_hibernate_removes_the_workspace_and_a_message_wakes_it(
    rt: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(rt, tmp_path, WAITS)
    assert rt.run(agent).state.status == "waiting"
    ws = rt.workspace(agent, "default").root
    assert (ws / "notes" / "a.txt").exists()

    snap = hibernate(rt, agent)
    assert not ws.exists()
    state = rt.store.load_state(agent)
    assert state.status == "hibernated" and state.waiting_for == "input"
    assert snap.files == 1 and snap.bytes == 600 and snap.stored_bytes < snap.bytes
    assert not snap.consumed
    assert rt.store.list_snapshots(agent) == [snap]
    # nothing runs a hibernated agent, and nothing recreates its folder
    assert rt.run(agent).steps == 0
    assert not ws.exists()

    rt.send(agent, "go on")
    woken = rt.store.load_state(agent)
    assert woken.status == "running" and woken.hibernated is not None
    out = rt.run(agent)
    assert out.state.status == "completed"
    assert (ws / "notes" / "a.txt").read_text() == "alpha\n" * 100
    assert rt.store.get_snapshot(snap.snapshot_id).consumed
    assert kinds(rt, agent).count(Kind.RESTORED) == 1
    read = [c for c in out.state.recent_calls if c["tool"] == "read_file"]
    assert read and read[0]["ok"]


def test_a_snapshot_is_restored_once(rt: Runtime, tmp_path: Path) -> None:
    agent = make_agent(rt, tmp_path, WAITS)
    rt.run(agent)
    snap = hibernate(rt, agent)
    state = restore(rt, snap.snapshot_id)
    assert state.status == "waiting" and state.waiting_for == "input"
    assert (rt.workspace(agent, "default").root / "notes" / "a.txt").exists()
    with pytest.raises(SnapshotConsumed, match="already restored"):
        restore(rt, snap.snapshot_id)
    with pytest.raises(UsageError, match="not hibernated"):
        wake(rt, agent)
    # a second hibernation makes a new snapshot; the old one stays consumed
    again = hibernate(rt, agent)
    assert again.snapshot_id != snap.snapshot_id
    assert [s.consumed for s in rt.store.list_snapshots(agent)] == [True, False]
    with pytest.raises(SnapshotConsumed):
        restore(rt, snap.snapshot_id)


def test_only_a_waiting_agent_is_hibernated(rt: Runtime, tmp_path: Path) -> None:
    agent = make_agent(rt, tmp_path, WAITS)
    with pytest.raises(UsageError, match="is created"):
        hibernate(rt, agent)
    rt.run(agent)
    hibernate(rt, agent)
    with pytest.raises(UsageError, match="already hibernated"):
        hibernate(rt, agent)


def test_a_damaged_blob_refuses_the_restore_and_changes_nothing(
    rt: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(rt, tmp_path, WAITS)
    rt.run(agent)
    snap = hibernate(rt, agent)
    (digest,) = snap.manifest.values()
    blob = rt.blobs("default")._path(digest)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x01
    blob.write_bytes(bytes(data))
    before = kinds(rt, agent)
    with pytest.raises(ArchiveError, match=f"blob {digest} .* is damaged"):
        restore(rt, snap.snapshot_id)
    assert kinds(rt, agent) == before
    assert not rt.store.get_snapshot(snap.snapshot_id).consumed
    ws = rt.workspace(agent, "default").root
    assert not ws.exists() and not list(ws.parent.glob(".restore-*"))


def test_idle_agents_are_hibernated_by_the_worker_and_woken_by_a_timer(
    rt: Runtime, tmp_path: Path
) -> None:
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"tool": "write_file", "args": {"path": "x.txt", "content": "x"}},
            {"wait": {"seconds": 3600, "reason": "check again in an hour"}},
            {"tool": "read_file", "args": {"path": "x.txt"}},
            {"finish": "checked"},
        ],
    )
    clock = rt.clock
    assert isinstance(clock, FakeClock)
    worker = Worker(rt, concurrency=2, hibernate_after=300)
    first = worker.run_until_idle()
    assert first.ran == {agent: "waiting"} and first.hibernated == []
    state = rt.store.load_state(agent)
    assert state.waiting_for == "timer" and state.timer is not None
    clock.advance(301)
    second = worker.run_until_idle()
    assert second.ran == {} and second.hibernated == [agent]
    assert rt.store.load_state(agent).status == "hibernated"
    clock.advance(3600)
    third = worker.run_until_idle()
    assert third.ran == {agent: "completed"}
    assert kinds(rt, agent).count(Kind.TIMER_FIRED) == 1
    assert kinds(rt, agent).count(Kind.RESTORED) == 1
    assert Worker(rt).run_until_idle().ran == {}


def test_rollback_of_a_hibernated_agent_asks_to_wake_it_first(rt: Runtime, tmp_path: Path) -> None:
    agent = make_agent(rt, tmp_path, WAITS)
    rt.run(agent)
    hibernate(rt, agent)
    before = kinds(rt, agent)
    with pytest.raises(UsageError, match="wake it first"):
        rt.rollback(agent, to_version=2)
    assert kinds(rt, agent) == before
    assert not rt.workspace(agent, "default").root.exists()


def test_every_activation_draws_fresh_entropy_even_from_a_copied_snapshot(
    tmp_path: Path,
) -> None:
    """Two copies of one store restore the same snapshot: the ids they mint differ.

    A snapshot holds no random state and no credentials: everything an
    activation draws comes from entropy taken when it starts. The clock is the
    same fake time in both copies, so only that entropy can tell them apart.
    """
    import shutil

    first = Runtime(SqliteStore(tmp_path / "a" / "s.db"), tmp_path / "a" / "data", FakeClock())
    agent = make_agent(first, tmp_path, WAITS)
    first.run(agent)
    hibernate(first, agent)
    first.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")

    minted = []
    for copy in ("a", "b"):
        rt = Runtime(SqliteStore(tmp_path / copy / "s.db"), tmp_path / copy / "data", FakeClock())
        rt.send(agent, "go on")
        assert rt.run(agent).state.status == "completed"
        events = rt.store.read_events(agent)
        restored_at = next(e.seq for e in events if e.kind == Kind.RESTORED)
        after = [e for e in events if e.seq > restored_at]
        ids = [e.data["activation"] for e in after if e.kind == Kind.ACTIVATION_STARTED]
        ids += [e.data["call_id"] for e in after if e.kind == Kind.TOOL_INTENT]
        assert ids, [e.kind for e in after]
        minted.append(ids)
        rt.close()
    a, b = minted
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        # the first 10 characters after the prefix are the time, the rest entropy
        assert x.split("_")[1][10:] != y.split("_")[1][10:], (x, y)
