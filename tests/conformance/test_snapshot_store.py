"""The store's hibernation contract (see ``stead.store.base``), checked on every backend.

A ``hibernated`` event makes a snapshot row in the transaction that stores it;
a ``restored`` event consumes it in the same way, and a second one is refused
with nothing stored. Workers find work through ``agents_to_run`` and idle agents
through ``idle_agents``; a tenant's view never shows another tenant's. The events
are built directly, so these tests check the store alone, not the runtime.
"""

from __future__ import annotations

from typing import Any

import pytest

from stead.errors import NotFound, SnapshotConsumed, SteadError
from stead.journal import Kind, NewEvent, seal
from stead.state import State, fold
from stead.store.base import AgentRecord, Batch, SnapshotRecord, Store
from stead.store.scoped import TenantStore

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MANIFEST = {"notes/a.txt": "a" * 64, "src/b.py": "b" * 64}
DIGEST = "d" * 64


def create(store: Store, agent_id: str, tenant: str = "t1", at: float = T0) -> State:
    return store.create_agent(
        AgentRecord(agent_id, tenant, agent_id, {"name": agent_id, "tenant": tenant}, at),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": tenant, "name": agent_id})],
        at=at,
    )


def commit(store: Store, agent_id: str, events: list[NewEvent], at: float) -> State:
    _, state = store.commit(store.load_state(agent_id), events, epoch=0, at=at)
    return state


def hibernated(snapshot_id: str, manifest: dict[str, str] | None = None) -> NewEvent:
    manifest = MANIFEST if manifest is None else manifest
    return NewEvent(
        Kind.HIBERNATED,
        {
            "snapshot_id": snapshot_id,
            "manifest": manifest,
            "manifest_digest": DIGEST,
            "files": len(manifest),
            "bytes": 1234,
            "stored_bytes": 321,
            "reason": "requested",
        },
    )


def restored(snapshot_id: str, by: str = "host:1:2") -> NewEvent:
    return NewEvent(Kind.RESTORED, {"snapshot_id": snapshot_id, "by": by})


STARTED = NewEvent(Kind.ACTIVATION_STARTED, {"worker": "w1"})
ASKS = NewEvent(Kind.INPUT_REQUESTED, {"prompt": "which branch?"})


def timer(due_at: float, timer_id: str = "tmr_1") -> NewEvent:
    return NewEvent(Kind.TIMER_SET, {"timer_id": timer_id, "due_at": due_at, "reason": ""})


def waiting_agent(store: Store, agent_id: str, tenant: str = "t1", at: float = T0) -> State:
    create(store, agent_id, tenant, at)
    return commit(store, agent_id, [STARTED, ASKS], at + 1)


def asleep(store: Store, agent_id: str, snapshot_id: str, tenant: str = "t1") -> State:
    """A waiting agent, hibernated in ``snapshot_id``."""
    waiting_agent(store, agent_id, tenant)
    return commit(store, agent_id, [hibernated(snapshot_id)], T0 + 2)


def stored(store: Store, agent_id: str) -> tuple[dict[str, Any], list[Any], float]:
    """Everything a refused write must leave as it was: state, journal, last change."""
    (summary,) = [a for a in store.list_agents() if a.agent_id == agent_id]
    return (
        store.load_state(agent_id).to_json(),
        list(store.read_events(agent_id)),
        summary.updated_at,
    )


def batch_of(store: Store, agent_id: str, events: list[NewEvent], at: float) -> Batch:
    state = store.load_state(agent_id)
    sealed = seal(agent_id, state.version + 1, state.head_hash, at, 0, events)
    return Batch(sealed, fold(sealed, state), state.version, 0)


# -- made and consumed with their events -----------------------------------------------------


def test_a_hibernated_event_makes_the_snapshot_with_its_data_and_seq(store: Store) -> None:
    waiting_agent(store, "ag_1")
    before = store.load_state("ag_1").version
    assert store.list_snapshots("ag_1") == []
    events, state = store.commit(
        store.load_state("ag_1"),
        [NewEvent(Kind.MEMORY_WRITTEN, {"values": {"k": "v"}}), hibernated("snap_1")],
        epoch=0,
        at=T0 + 5,
    )
    assert events[1].seq == before + 2
    expected = SnapshotRecord(
        snapshot_id="snap_1",
        agent_id="ag_1",
        tenant="t1",
        version=before + 2,
        manifest=MANIFEST,
        manifest_digest=DIGEST,
        files=2,
        bytes=1234,
        stored_bytes=321,
        created_at=T0 + 5,
    )
    assert store.get_snapshot("snap_1") == expected
    assert not expected.consumed
    assert store.list_snapshots("ag_1") == [expected]
    assert store.load_state("ag_1").to_json() == state.to_json()
    assert state.status == "hibernated" and state.hibernated is not None
    assert state.hibernated["snapshot_id"] == "snap_1"


def test_a_restored_event_consumes_the_snapshot(store: Store) -> None:
    asleep(store, "ag_1", "snap_1")
    made = store.get_snapshot("snap_1")
    state = commit(store, "ag_1", [restored("snap_1", by="vm:42:7")], T0 + 9)
    row = store.get_snapshot("snap_1")
    assert row.consumed and row.consumed_at == T0 + 9 and row.consumed_by == "vm:42:7"
    from dataclasses import replace

    assert row == replace(made, consumed_at=T0 + 9, consumed_by="vm:42:7")
    assert state.status == "waiting" and state.waiting_for == "input"
    assert state.hibernated is None
    assert store.list_snapshots("ag_1") == [row]


def test_a_second_restore_is_refused_and_stores_nothing(store: Store) -> None:
    asleep(store, "ag_1", "snap_1")
    commit(store, "ag_1", [restored("snap_1", by="first")], T0 + 3)
    before = stored(store, "ag_1")
    row = store.get_snapshot("snap_1")
    with pytest.raises(SnapshotConsumed, match="snapshot snap_1 was already restored") as exc:
        commit(store, "ag_1", [restored("snap_1", by="second")], T0 + 4)
    assert "(by first)" in str(exc.value)
    assert stored(store, "ag_1") == before
    assert store.get_snapshot("snap_1") == row


def test_a_refused_restore_takes_the_rest_of_its_write_with_it(store: Store) -> None:
    asleep(store, "ag_1", "snap_1")
    commit(store, "ag_1", [restored("snap_1")], T0 + 3)
    before = stored(store, "ag_1")
    memory = NewEvent(Kind.MEMORY_WRITTEN, {"values": {"lost": True}})
    with pytest.raises(SnapshotConsumed):
        commit(store, "ag_1", [memory, restored("snap_1")], T0 + 4)
    assert stored(store, "ag_1") == before
    assert "lost" not in store.load_state("ag_1").memory


def test_two_restores_of_one_snapshot_in_one_write_are_refused_together(store: Store) -> None:
    asleep(store, "ag_1", "snap_1")
    before = stored(store, "ag_1")
    with pytest.raises(SnapshotConsumed, match="snap_1"):
        commit(store, "ag_1", [restored("snap_1", by="a"), restored("snap_1", by="b")], T0 + 3)
    assert stored(store, "ag_1") == before
    assert not store.get_snapshot("snap_1").consumed


def test_a_snapshot_made_and_restored_in_one_write_is_consumed(store: Store) -> None:
    waiting_agent(store, "ag_1")
    commit(store, "ag_1", [hibernated("snap_1"), restored("snap_1", by="me")], T0 + 3)
    row = store.get_snapshot("snap_1")
    assert row.consumed and row.consumed_by == "me" and row.consumed_at == T0 + 3
    assert store.load_state("ag_1").hibernated is None


def test_a_restore_of_an_unknown_snapshot_is_not_found_and_stores_nothing(store: Store) -> None:
    asleep(store, "ag_1", "snap_1")
    before = stored(store, "ag_1")
    with pytest.raises(NotFound, match="snap_nope"):
        commit(store, "ag_1", [restored("snap_nope")], T0 + 3)
    assert stored(store, "ag_1") == before
    assert not store.get_snapshot("snap_1").consumed
    with pytest.raises(NotFound, match="snap_nope"):
        store.get_snapshot("snap_nope")


def test_a_restore_cannot_consume_another_agent_s_snapshot(store: Store) -> None:
    """A snapshot is consumed by its own agent's ``restored`` event, or not at all.

    Otherwise the snapshot table and the owner's journal disagree: the owner
    still names the snapshot as the one to restore, and it never can be.
    """
    asleep(store, "ag_owner", "snap_1")
    waiting_agent(store, "ag_other")
    before = stored(store, "ag_other")
    with pytest.raises(SteadError):
        commit(store, "ag_other", [restored("snap_1")], T0 + 3)
    assert stored(store, "ag_other") == before
    assert not store.get_snapshot("snap_1").consumed


def test_snapshots_are_listed_oldest_first(store: Store) -> None:
    asleep(store, "ag_1", "snap_1")
    commit(store, "ag_1", [restored("snap_1")], T0 + 3)
    commit(store, "ag_1", [hibernated("snap_2", {"c.txt": "c" * 64})], T0 + 4)
    asleep(store, "ag_2", "snap_3")
    rows = store.list_snapshots("ag_1")
    assert [(r.snapshot_id, r.consumed) for r in rows] == [("snap_1", True), ("snap_2", False)]
    assert rows[0].version < rows[1].version
    assert rows[1].manifest == {"c.txt": "c" * 64} and rows[1].files == 1
    assert [r.snapshot_id for r in store.list_snapshots("ag_2")] == ["snap_3"]
    with pytest.raises(NotFound, match="ag_nope"):
        store.list_snapshots("ag_nope")


# -- group commit -------------------------------------------------------------------------


def test_a_refused_batch_in_a_group_commit_does_not_stop_the_others(store: Store) -> None:
    for n in (1, 2, 3, 4):
        asleep(store, f"ag_{n}", f"snap_{n}")
    commit(store, "ag_2", [restored("snap_2", by="earlier")], T0 + 3)
    before_2, before_3 = stored(store, "ag_2"), stored(store, "ag_3")
    consumed_2 = store.get_snapshot("snap_2")
    batches = [
        batch_of(store, "ag_1", [restored("snap_1", by="group")], T0 + 10),
        batch_of(store, "ag_2", [restored("snap_2", by="group")], T0 + 10),
        batch_of(store, "ag_3", [restored("snap_nope", by="group")], T0 + 10),
        batch_of(store, "ag_4", [restored("snap_4", by="group")], T0 + 10),
    ]
    results = store.append_many(batches, T0 + 10)
    assert results[0] is None and results[3] is None
    assert isinstance(results[1], SnapshotConsumed) and "snap_2" in str(results[1])
    assert isinstance(results[2], NotFound) and "snap_nope" in str(results[2])
    for n in (1, 4):
        row = store.get_snapshot(f"snap_{n}")
        assert row.consumed_by == "group" and row.consumed_at == T0 + 10
        assert store.load_state(f"ag_{n}").to_json() == batches[n - 1].state.to_json()
    assert store.get_snapshot("snap_2") == consumed_2
    assert not store.get_snapshot("snap_3").consumed
    assert stored(store, "ag_2") == before_2
    assert stored(store, "ag_3") == before_3


# -- what a worker is offered ---------------------------------------------------------------


def population(store: Store, tenant: str = "t1", prefix: str = "ag") -> dict[str, str]:
    """One agent in each situation a worker's queries must tell apart; name -> id."""
    ids = {
        name: f"{prefix}_{name}"
        for name in (
            "created",
            "running",
            "asks",
            "timer100",
            "fired",
            "asleep",
            "asleep_timer50",
            "done",
            "failed_timer10",
            "attention_timer10",
        )
    }
    for _name, agent in ids.items():
        create(store, agent, tenant)
    commit(store, ids["running"], [STARTED], T0 + 1)
    commit(store, ids["asks"], [STARTED, ASKS], T0 + 1)
    commit(store, ids["timer100"], [STARTED, timer(T0 + 100)], T0 + 2)
    commit(store, ids["fired"], [STARTED, timer(T0 + 5)], T0 + 1)
    commit(
        store,
        ids["fired"],
        [NewEvent(Kind.TIMER_FIRED, {"timer_id": "tmr_1", "due_at": T0 + 5})],
        T0 + 6,
    )
    commit(store, ids["asleep"], [STARTED, ASKS, hibernated(f"snap_{prefix}_a")], T0 + 1)
    commit(
        store,
        ids["asleep_timer50"],
        [STARTED, timer(T0 + 50), hibernated(f"snap_{prefix}_b")],
        T0 + 1,
    )
    commit(store, ids["done"], [STARTED, NewEvent(Kind.FINISH_CLAIMED, {"summary": "ok"})], T0 + 1)
    commit(
        store,
        ids["failed_timer10"],
        [STARTED, timer(T0 + 10), NewEvent(Kind.STATUS_CHANGED, {"status": "failed"})],
        T0 + 1,
    )
    commit(
        store,
        ids["attention_timer10"],
        [
            STARTED,
            timer(T0 + 10),
            NewEvent(Kind.STATUS_CHANGED, {"status": "needs_attention", "reason": "look"}),
        ],
        T0 + 1,
    )
    return ids


def test_population_has_the_statuses_it_names(store: Store) -> None:
    ids = population(store)
    status = {name: store.load_state(agent).status for name, agent in ids.items()}
    assert status == {
        "created": "created",
        "running": "running",
        "asks": "waiting",
        "timer100": "waiting",
        "fired": "running",
        "asleep": "hibernated",
        "asleep_timer50": "hibernated",
        "done": "completed",
        "failed_timer10": "failed",
        "attention_timer10": "needs_attention",
    }
    assert store.load_state(ids["asleep_timer50"]).timer is not None
    assert store.load_state(ids["failed_timer10"]).timer is not None


def test_agents_to_run_are_runnable_ones_and_sleepers_whose_timer_is_due(store: Store) -> None:
    ids = population(store)

    def offered(now: float) -> list[str]:
        return [name for name, agent in sorted(ids.items()) if agent in store.agents_to_run(now)]

    always = ["created", "fired", "running"]
    assert offered(T0) == always
    assert offered(T0 + 49.999) == always
    assert offered(T0 + 50) == sorted([*always, "asleep_timer50"])
    assert offered(T0 + 99.999) == sorted([*always, "asleep_timer50"])
    assert offered(T0 + 100) == sorted([*always, "asleep_timer50", "timer100"])
    assert offered(T0 + 1e9) == sorted([*always, "asleep_timer50", "timer100"])
    assert store.agents_to_run(T0 + 1e9) == sorted(store.agents_to_run(T0 + 1e9))
    # a fired timer leaves nothing to wake for; a restored sleeper waits as before
    commit(store, ids["asleep_timer50"], [restored("snap_ag_b")], T0 + 60)
    assert store.load_state(ids["asleep_timer50"]).status == "waiting"
    assert ids["asleep_timer50"] in store.agents_to_run(T0 + 60)
    assert ids["asleep_timer50"] not in store.agents_to_run(T0 + 49)


def test_idle_agents_are_waiting_ones_unchanged_since_a_time(store: Store) -> None:
    """Waiting for input, a timer or a person (needs_attention) counts as idle."""
    ids = population(store)
    idle = lambda before: sorted(store.idle_agents(before))  # noqa: E731
    person = ids["attention_timer10"]
    assert idle(T0) == []
    assert idle(T0 + 1) == sorted([ids["asks"], person])
    everyone = sorted([ids["asks"], ids["timer100"], person])
    assert idle(T0 + 2) == everyone
    assert idle(T0 + 1e9) == everyone
    # a change makes an agent recent again
    commit(store, ids["asks"], [NewEvent(Kind.MEMORY_WRITTEN, {"values": {"x": 1}})], T0 + 30)
    assert store.load_state(ids["asks"]).status == "waiting"
    assert idle(T0 + 29) == sorted([ids["timer100"], person])
    assert idle(T0 + 30) == everyone
    # hibernating one makes it no longer idle; restoring it makes it idle from then
    commit(store, ids["asks"], [hibernated("snap_x")], T0 + 40)
    assert idle(T0 + 1e9) == sorted([ids["timer100"], person])
    commit(store, ids["asks"], [restored("snap_x")], T0 + 50)
    assert idle(T0 + 49) == sorted([ids["timer100"], person])
    assert idle(T0 + 50) == everyone


# -- tenants --------------------------------------------------------------------------------


@pytest.fixture
def views(store: Store) -> tuple[TenantStore, TenantStore]:
    return TenantStore(store, "acme"), TenantStore(store, "globex")


def test_another_tenant_s_snapshot_is_not_found_like_a_missing_one(
    store: Store, views: tuple[TenantStore, TenantStore]
) -> None:
    a, b = views
    asleep(store, "ag_b", "snap_b", tenant="globex")
    asleep(store, "ag_a", "snap_a", tenant="acme")
    with pytest.raises(NotFound) as other:
        a.get_snapshot("snap_b")
    with pytest.raises(NotFound) as missing:
        a.get_snapshot("snap_nope")
    assert str(other.value) == str(missing.value).replace("snap_nope", "snap_b")
    with pytest.raises(NotFound) as other:
        a.list_snapshots("ag_b")
    with pytest.raises(NotFound) as missing:
        a.list_snapshots("ag_nope")
    assert str(other.value) == str(missing.value).replace("ag_nope", "ag_b")
    # each sees its own
    assert b.get_snapshot("snap_b").tenant == "globex"
    assert [r.snapshot_id for r in b.list_snapshots("ag_b")] == ["snap_b"]
    assert [r.snapshot_id for r in a.list_snapshots("ag_a")] == ["snap_a"]


def test_a_tenant_cannot_consume_another_tenant_s_snapshot(
    store: Store, views: tuple[TenantStore, TenantStore]
) -> None:
    """A view's write naming another tenant's snapshot is refused as if it did not exist."""
    a, _ = views
    asleep(store, "ag_b", "snap_b", tenant="globex")
    waiting_agent(store, "ag_a", tenant="acme")
    before = stored(store, "ag_a")
    with pytest.raises(NotFound) as missing:
        a.commit(a.load_state("ag_a"), [restored("snap_nope")], epoch=0, at=T0 + 5)
    with pytest.raises(NotFound) as other:
        a.commit(a.load_state("ag_a"), [restored("snap_b")], epoch=0, at=T0 + 5)
    assert str(other.value) == str(missing.value).replace("snap_nope", "snap_b")
    assert stored(store, "ag_a") == before
    assert not store.get_snapshot("snap_b").consumed


def test_a_tenant_s_view_is_offered_only_its_own_agents(
    store: Store, views: tuple[TenantStore, TenantStore]
) -> None:
    a, b = views
    mine = population(store, "acme", "ag_a")
    theirs = population(store, "globex", "ag_b")
    for now in (T0, T0 + 50, T0 + 1e9):
        everyone = store.agents_to_run(now)
        assert set(a.agents_to_run(now)) == {x for x in everyone if x in mine.values()}
        assert set(b.agents_to_run(now)) == {x for x in everyone if x in theirs.values()}
        assert not set(a.agents_to_run(now)) & set(theirs.values())
        assert a.agents_to_run(now, "globex") == []
        assert a.agents_to_run(now, "acme") == a.agents_to_run(now)
        assert store.agents_to_run(now, "acme") == a.agents_to_run(now)
        idle = store.idle_agents(now)
        assert set(a.idle_agents(now)) == {x for x in idle if x in mine.values()}
        assert not set(a.idle_agents(now)) & set(theirs.values())
        assert a.idle_agents(now, "globex") == []
        assert store.idle_agents(now, "globex") == b.idle_agents(now)
    assert a.idle_agents(T0 + 1e9) == sorted(
        [mine["asks"], mine["timer100"], mine["attention_timer10"]]
    )
    assert a.agents_to_run(T0 + 1e9) == sorted(
        mine[n] for n in ("created", "running", "fired", "asleep_timer50", "timer100")
    )
