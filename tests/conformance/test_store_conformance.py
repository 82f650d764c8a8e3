"""The store contract (see ``stead.store.base``), checked on every backend.

Every test takes the ``store`` fixture from this folder's conftest, so it runs once
per backend; a backend that passes this file can be used by the runtime.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from stead.errors import LeaseHeld, NotFound, StaleEpoch, StoreError, VersionConflict
from stead.journal import Event, Kind, NewEvent, seal, verify_chain
from stead.state import State, fold
from stead.store.base import AgentRecord, Lease, Store

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
TTL = 30.0


def record(agent_id: str = "ag_1", tenant: str = "t1", name: str = "agent one") -> AgentRecord:
    spec = {"name": name, "tenant": tenant, "model": "scripted:s.yaml", "tools": ["read_file"]}
    return AgentRecord(agent_id, tenant, name, spec, T0)


def created(tenant: str = "t1", name: str = "agent one") -> NewEvent:
    return NewEvent(
        Kind.AGENT_CREATED,
        {"tenant": tenant, "name": name, "goals": [{"id": "g1", "description": "do it"}]},
    )


def create(store: Store, agent_id: str = "ag_1", tenant: str = "t1", at: float = T0) -> State:
    return store.create_agent(record(agent_id, tenant), [created(tenant)], at=at)


def batch(i: int) -> list[NewEvent]:
    """A varied, foldable batch of events, numbered so that batches differ."""
    return [
        NewEvent(Kind.ACTIVATION_STARTED, {"worker": f"w{i}", "activation": f"act_{i}"}),
        NewEvent(Kind.MEMORY_WRITTEN, {"values": {f"k{i}": i, "note": f"ünïcode {i}"}}),
        NewEvent(Kind.GOAL_PUSHED, {"id": f"g{i + 2}", "description": "more"}),
        NewEvent(Kind.STEP_COMPLETED, {"changed": {f"f{i}.txt": "ab" * 32}, "removed": []}),
    ]


def commit_batches(store: Store, state: State, n: int, epoch: int = 0) -> State:
    for i in range(n):
        _, state = store.commit(state, batch(i), epoch=epoch, at=T0 + 1 + i)
    return state


def events(store: Store, agent_id: str = "ag_1", *args: Any) -> list[Event]:
    return list(store.read_events(agent_id, *args))


# -- agents --------------------------------------------------------------------------


def test_create_agent_then_read_it_back(store: Store) -> None:
    state = create(store)
    assert state.agent_id == "ag_1"
    assert state.version == 1
    assert state.tenant == "t1"
    assert [g["id"] for g in state.goals] == ["g1"]
    assert store.load_state("ag_1") == state
    assert store.get_record("ag_1") == record()
    evs = events(store)
    assert [(e.seq, e.kind, e.at, e.epoch) for e in evs] == [(1, Kind.AGENT_CREATED, T0, 0)]
    assert state.head_hash == evs[0].hash


def test_create_agent_with_several_events_numbers_them_from_one(store: Store) -> None:
    state = store.create_agent(record(), [created(), *batch(0)], at=T0)
    assert state.version == 5
    assert [e.seq for e in events(store)] == [1, 2, 3, 4, 5]
    assert store.load_state("ag_1") == state == fold(events(store))


def test_list_agents_filters_by_tenant(store: Store) -> None:
    create(store, "ag_1", "t1", at=T0)
    create(store, "ag_2", "t2", at=T0 + 1)
    create(store, "ag_3", "t1", at=T0 + 2)
    assert [a.agent_id for a in store.list_agents()] == ["ag_1", "ag_2", "ag_3"]
    assert [a.agent_id for a in store.list_agents("t1")] == ["ag_1", "ag_3"]
    assert [a.agent_id for a in store.list_agents("t2")] == ["ag_2"]
    assert store.list_agents("nobody") == []
    first = store.list_agents("t2")[0]
    assert (first.tenant, first.name, first.status, first.version, first.updated_at) == (
        "t2",
        "agent one",
        "created",
        1,
        T0 + 1,
    )


def test_list_agents_reflects_the_latest_commit(store: Store) -> None:
    state = create(store)
    store.commit(state, [NewEvent(Kind.ACTIVATION_STARTED, {})], epoch=0, at=T0 + 50)
    (summary,) = store.list_agents()
    assert (summary.status, summary.version, summary.updated_at) == ("running", 2, T0 + 50)


def test_creating_a_duplicate_id_fails_and_keeps_the_original(store: Store) -> None:
    create(store, "ag_1", "t1")
    before = events(store)
    with pytest.raises(StoreError, match="ag_1"):
        store.create_agent(record("ag_1", "t2", "impostor"), [created("t2", "impostor")], T0 + 9)
    assert store.get_record("ag_1") == record()
    assert store.load_state("ag_1").tenant == "t1"
    assert events(store) == before
    assert [a.agent_id for a in store.list_agents()] == ["ag_1"]


# -- the journal ---------------------------------------------------------------------


def test_commit_appends_contiguous_events_and_stores_the_folded_state(store: Store) -> None:
    state = create(store)
    sealed_all = events(store)
    for i in range(3):
        sealed, state = store.commit(state, batch(i), epoch=0, at=T0 + 10 + i)
        assert [e.seq for e in sealed] == list(range(2 + 4 * i, 6 + 4 * i))
        assert sealed[0].prev_hash == sealed_all[-1].hash
        sealed_all += sealed
        assert state.version == sealed[-1].seq
    stored = events(store)
    assert [e.seq for e in stored] == list(range(1, 14))
    assert stored == sealed_all
    assert store.load_state("ag_1") == state == fold(stored)
    assert state.memory == {"k0": 0, "k1": 1, "k2": 2, "note": "ünïcode 2"}
    assert state.manifest == {f"f{i}.txt": "ab" * 32 for i in range(3)}


def test_commit_of_no_events_stores_nothing(store: Store) -> None:
    state = create(store)
    sealed, same = store.commit(state, [], epoch=0, at=T0 + 1)
    assert sealed == []
    assert same == state
    assert store.load_state("ag_1").version == 1


@pytest.mark.parametrize(
    ("from_seq", "to_seq", "expected"),
    [
        (1, None, list(range(1, 10))),
        (0, None, list(range(1, 10))),
        (4, None, list(range(4, 10))),
        (2, 5, [2, 3, 4, 5]),
        (6, 6, [6]),
        (1, 1, [1]),
        (7, 100, [7, 8, 9]),
        (9, None, [9]),
        (10, None, []),
        (5, 3, []),
    ],
)
def test_read_events_ranges(
    store: Store, from_seq: int, to_seq: int | None, expected: list[int]
) -> None:
    commit_batches(store, create(store), 2)
    got = events(store, "ag_1", from_seq, to_seq)
    assert [e.seq for e in got] == expected
    everything = events(store)
    assert got == [e for e in everything if e.seq in expected]


def test_state_at_every_version_is_the_fold_of_its_prefix(store: Store) -> None:
    latest = commit_batches(store, create(store), 3)
    everything = events(store)
    for version in range(1, latest.version + 1):
        assert store.state_at("ag_1", version) == fold(everything[:version]), version
    assert store.state_at("ag_1", latest.version) == store.load_state("ag_1")
    assert store.state_at("ag_1", 1).memory == {}
    assert store.state_at("ag_1", 3).memory == {"k0": 0, "note": "ünïcode 0"}


@pytest.mark.parametrize("version", [0, -1, 14, 1000])
def test_state_at_out_of_range_raises_not_found(store: Store, version: int) -> None:
    commit_batches(store, create(store), 3)  # versions 1..13
    with pytest.raises(NotFound, match="versions 1 to 13"):
        store.state_at("ag_1", version)


def test_commit_on_a_stale_version_conflicts_and_stores_nothing(store: Store) -> None:
    base = create(store)
    _, winner = store.commit(base, batch(0), epoch=0, at=T0 + 1)
    before = events(store)
    with pytest.raises(VersionConflict):
        store.commit(base, batch(1), epoch=0, at=T0 + 2)
    assert events(store) == before
    assert store.load_state("ag_1") == winner
    assert store.list_agents()[0].version == winner.version == 5


def test_an_agent_written_by_one_store_user_is_not_clobbered_by_another(store: Store) -> None:
    base = create(store)
    store.commit(base, batch(0), epoch=0, at=T0 + 1)
    # a second writer that still holds the version-1 state, with more events than the first
    with pytest.raises(VersionConflict):
        store.commit(base, batch(1) + batch(2), epoch=0, at=T0 + 2)
    assert [e.seq for e in events(store)] == [1, 2, 3, 4, 5]


def test_stored_events_verify_as_a_hash_chain(store: Store) -> None:
    latest = commit_batches(store, create(store), 4)
    report = verify_chain(events(store))
    assert report.ok, report.reason
    assert report.events == latest.version == 17
    assert report.head_hash == latest.head_hash == store.load_state("ag_1").head_hash


def test_chains_of_different_agents_are_independent(store: Store) -> None:
    commit_batches(store, create(store, "ag_1"), 2)
    commit_batches(store, create(store, "ag_2"), 1)
    assert verify_chain(events(store, "ag_1")).events == 9
    assert verify_chain(events(store, "ag_2")).events == 5
    assert {e.agent_id for e in events(store, "ag_2")} == {"ag_2"}


def test_chain_verifies_when_timestamps_are_whole_numbers(store: Store) -> None:
    # ``at`` is typed float, but a clock such as FakeClock(start=0) hands out ints;
    # what the store gives back must hash the same as what was sealed.
    state = store.create_agent(record(), [created()], at=1_767_225_600)
    store.commit(state, batch(0), epoch=0, at=1_767_225_601)
    report = verify_chain(events(store))
    assert report.ok, f"event {report.bad_seq}: {report.reason}"


# -- leases --------------------------------------------------------------------------


def test_acquire_on_a_free_agent_gives_epoch_one(store: Store) -> None:
    create(store)
    assert store.get_lease("ag_1") is None
    lease = store.acquire_lease("ag_1", "w1", TTL, T0)
    assert lease == Lease("ag_1", "w1", 1, T0 + TTL)
    assert store.get_lease("ag_1") == lease


def test_a_live_lease_is_held_against_another_owner(store: Store) -> None:
    create(store)
    lease = store.acquire_lease("ag_1", "w1", TTL, T0)
    with pytest.raises(LeaseHeld, match="w1"):
        store.acquire_lease("ag_1", "w2", TTL, T0 + 1)
    with pytest.raises(LeaseHeld):
        store.acquire_lease("ag_1", "w2", TTL, T0 + TTL - 0.001)
    assert store.get_lease("ag_1") == lease


def test_an_expired_lease_can_be_taken_by_another_owner(store: Store) -> None:
    create(store)
    store.acquire_lease("ag_1", "w1", TTL, T0)
    taken = store.acquire_lease("ag_1", "w2", TTL, T0 + TTL)  # expires_at is exclusive
    assert (taken.owner, taken.epoch, taken.expires_at) == ("w2", 2, T0 + 2 * TTL)
    assert store.get_lease("ag_1") == taken


def test_takeover_displaces_only_the_named_holder(store: Store) -> None:
    create(store)
    store.acquire_lease("ag_1", "w1", TTL, T0)
    with pytest.raises(LeaseHeld):
        store.acquire_lease("ag_1", "w2", TTL, T0 + 1, takeover="w3")
    taken = store.acquire_lease("ag_1", "w2", TTL, T0 + 1, takeover="w1")
    assert (taken.owner, taken.epoch) == ("w2", 2)
    with pytest.raises(LeaseHeld, match="w2"):
        store.acquire_lease("ag_1", "w1", TTL, T0 + 2)


def test_every_acquisition_raises_the_epoch(store: Store) -> None:
    create(store)
    epochs = [store.acquire_lease("ag_1", "w1", TTL, T0).epoch]
    epochs.append(store.acquire_lease("ag_1", "w1", TTL, T0 + 1).epoch)  # same owner again
    epochs.append(store.acquire_lease("ag_1", "w2", TTL, T0 + 100).epoch)  # after expiry
    epochs.append(store.acquire_lease("ag_1", "w3", TTL, T0 + 101, takeover="w2").epoch)
    lease = store.get_lease("ag_1")
    assert lease is not None
    store.release_lease(lease)
    epochs.append(store.acquire_lease("ag_1", "w4", TTL, T0 + 102).epoch)  # after release
    assert epochs == [1, 2, 3, 4, 5]


def test_commit_under_the_current_epoch_succeeds(store: Store) -> None:
    state = create(store)
    lease = store.acquire_lease("ag_1", "w1", TTL, T0)
    sealed, state = store.commit(state, batch(0), epoch=lease.epoch, at=T0 + 1)
    assert {e.epoch for e in sealed} == {1}
    assert {e.epoch for e in events(store, "ag_1", 2)} == {1}
    assert store.load_state("ag_1") == state


@pytest.mark.parametrize("write_epoch", [0, 1, 3])
def test_commit_under_a_stale_epoch_stores_nothing(store: Store, write_epoch: int) -> None:
    state = create(store)
    store.acquire_lease("ag_1", "w1", TTL, T0)
    store.acquire_lease("ag_1", "w2", TTL, T0 + 1, takeover="w1")  # epoch 2
    before = events(store)
    with pytest.raises(StaleEpoch):
        store.commit(state, batch(0), epoch=write_epoch, at=T0 + 2)
    assert events(store) == before
    assert store.load_state("ag_1") == state


def test_a_writer_that_lost_its_lease_is_fenced_off(store: Store) -> None:
    state = create(store)
    old = store.acquire_lease("ag_1", "w1", TTL, T0)
    _, state = store.commit(state, batch(0), epoch=old.epoch, at=T0 + 1)
    new = store.acquire_lease("ag_1", "w2", TTL, T0 + TTL + 1)  # w1 stalled past expiry
    _, after_new = store.commit(state, batch(1), epoch=new.epoch, at=T0 + TTL + 2)
    with pytest.raises((StaleEpoch, VersionConflict)):
        store.commit(state, batch(2), epoch=old.epoch, at=T0 + TTL + 3)
    # even with an up-to-date version, the old epoch is refused
    with pytest.raises(StaleEpoch):
        store.commit(after_new, batch(2), epoch=old.epoch, at=T0 + TTL + 3)
    assert store.load_state("ag_1") == after_new
    assert verify_chain(events(store)).ok


def test_renew_extends_a_current_lease(store: Store) -> None:
    create(store)
    lease = store.acquire_lease("ag_1", "w1", TTL, T0)
    renewed = store.renew_lease(lease, TTL, T0 + 20)
    assert renewed == Lease("ag_1", "w1", 1, T0 + 20 + TTL)
    assert store.get_lease("ag_1") == renewed
    with pytest.raises(LeaseHeld):
        store.acquire_lease("ag_1", "w2", TTL, T0 + TTL + 1)  # would have expired unrenewed


def test_renew_with_a_stale_epoch_raises(store: Store) -> None:
    create(store)
    old = store.acquire_lease("ag_1", "w1", TTL, T0)
    new = store.acquire_lease("ag_1", "w2", TTL, T0 + 1, takeover="w1")
    with pytest.raises(StaleEpoch):
        store.renew_lease(old, TTL, T0 + 2)
    assert store.get_lease("ag_1") == new


def test_renew_leases_renews_the_held_and_refuses_the_rest_one_by_one(store: Store) -> None:
    for agent_id in ("ag_1", "ag_2", "ag_3"):
        create(store, agent_id)
    held = store.acquire_lease("ag_1", "w1", TTL, T0)
    taken = store.acquire_lease("ag_2", "w1", TTL, T0)
    theirs = store.acquire_lease("ag_2", "w2", TTL, T0 + 1, takeover="w1")
    released = store.acquire_lease("ag_3", "w1", TTL, T0)
    store.release_lease(released)
    got = store.renew_leases([held, taken, released], TTL, T0 + 20)
    assert got == [Lease("ag_1", "w1", 1, T0 + 20 + TTL), None, None]
    assert store.get_lease("ag_1") == got[0]
    assert store.get_lease("ag_2") == theirs
    assert store.renew_leases([], TTL, T0 + 21) == []


def test_renew_after_release_is_refused(store: Store) -> None:
    # a released lease is no longer "held at its epoch" (base.renew_lease), so a late
    # renewal (say, a heartbeat racing the release) must not bring it back to life
    create(store)
    lease = store.acquire_lease("ag_1", "w1", TTL, T0)
    store.release_lease(lease)
    with pytest.raises(StaleEpoch):
        store.renew_lease(lease, TTL, T0 + 1)
    taken = store.acquire_lease("ag_1", "w2", TTL, T0 + 2)
    assert (taken.owner, taken.epoch) == ("w2", 2)


def test_release_then_reacquire(store: Store) -> None:
    create(store)
    lease = store.acquire_lease("ag_1", "w1", TTL, T0)
    store.release_lease(lease)
    released = store.get_lease("ag_1")
    assert released is not None
    assert not released.live(T0 + 1)
    again = store.acquire_lease("ag_1", "w2", TTL, T0 + 1)  # well before w1's expiry
    assert (again.owner, again.epoch) == ("w2", 2)


def test_releasing_a_stale_lease_does_nothing(store: Store) -> None:
    create(store)
    old = store.acquire_lease("ag_1", "w1", TTL, T0)
    new = store.acquire_lease("ag_1", "w2", TTL, T0 + 1, takeover="w1")
    store.release_lease(old)
    assert store.get_lease("ag_1") == new
    with pytest.raises(LeaseHeld):
        store.acquire_lease("ag_1", "w3", TTL, T0 + 2)


def test_concurrent_acquirers_on_one_store_exactly_one_wins(store: Store) -> None:
    create(store)
    n = 8
    barrier = threading.Barrier(n)
    won: list[Lease] = []
    held: list[LeaseHeld] = []

    def contend(i: int) -> None:
        barrier.wait()
        try:
            won.append(store.acquire_lease("ag_1", f"w{i}", TTL, T0))
        except LeaseHeld as exc:
            held.append(exc)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert len(held) == n - 1
    assert won[0].epoch == 1
    assert store.get_lease("ag_1") == won[0]


# -- unknown agents ------------------------------------------------------------------


def test_unknown_agent_ids_raise_not_found(store: Store) -> None:
    create(store)
    with pytest.raises(NotFound):
        store.get_record("ag_nope")
    with pytest.raises(NotFound):
        store.load_state("ag_nope")
    with pytest.raises(NotFound):
        list(store.read_events("ag_nope"))
    with pytest.raises(NotFound):
        store.state_at("ag_nope", 1)
    with pytest.raises(NotFound):
        store.acquire_lease("ag_nope", "w1", TTL, T0)
    ghost = State(agent_id="ag_nope", version=1, head_hash="1" * 64)
    with pytest.raises(NotFound):
        store.commit(ghost, batch(0), epoch=0, at=T0)
    assert store.get_lease("ag_nope") is None
    assert [a.agent_id for a in store.list_agents()] == ["ag_1"]


def test_append_refuses_events_that_do_not_continue_the_chain(store: Store) -> None:
    rec = AgentRecord("ag_app", "default", "n", {}, 1.0)
    state = store.create_agent(
        rec, [NewEvent("agent_created", {"tenant": "default", "name": "n"})], 1.0
    )
    good = seal("ag_app", 2, state.head_hash, 2.0, 0, [NewEvent("memory_written", {"values": {}})])
    gap = seal("ag_app", 3, state.head_hash, 2.0, 0, [NewEvent("memory_written", {"values": {}})])
    with pytest.raises(StoreError, match="do not continue the chain"):
        store.append(gap, fold(gap, state), expected_version=1, epoch=0, at=2.0)
    with pytest.raises(StoreError, match="not the state after"):
        store.append(good, state, expected_version=1, epoch=0, at=2.0)
    assert store.load_state("ag_app").version == 1
    store.append(good, fold(good, state), expected_version=1, epoch=0, at=2.0)
    assert store.load_state("ag_app").version == 2


# -- anchors ---------------------------------------------------------------------------


def test_a_creation_seals_the_spec_in_its_first_event_and_its_anchor(store: Store) -> None:
    from stead.store.anchors import spec_digest

    create(store)
    digest = spec_digest(record().spec)
    assert events(store)[0].data["spec_digest"] == digest
    anchor = store.get_anchor("ag_1")
    assert anchor is not None and (anchor.spec_hash, anchor.epoch) == (digest, 0)
    assert store.get_record("ag_1").spec == record().spec  # the column is not changed


def test_the_row_says_what_the_state_does(store: Store) -> None:
    from stead.store.base import AgentRow

    state = create(store)
    assert store.get_row("ag_1") == AgentRow("ag_1", "t1", "agent one", "created", 1, None)
    lease = store.acquire_lease("ag_1", "w", TTL, T0)
    due = {"timer_id": "tm_1", "due_at": T0 + 60.5, "reason": "later"}
    _, state = store.commit(
        state,
        [NewEvent(Kind.ACTIVATION_STARTED, {"worker": "w"}), NewEvent(Kind.TIMER_SET, due)],
        epoch=lease.epoch,
        at=T0 + 1,
    )
    row = store.get_row("ag_1")
    assert (row.status, row.version, row.wake_at) == (state.status, state.version, T0 + 60.5)
    anchor = store.get_anchor("ag_1")
    assert anchor is not None and anchor.epoch == lease.epoch  # the commit's lease
    with pytest.raises(NotFound):
        store.get_row("ag_missing")


def test_a_creation_stores_the_anchor_its_signer_returns(store: Store) -> None:
    from dataclasses import replace

    from stead.store.anchors import Anchor

    signed: list[Anchor] = []

    def sign(anchor: Anchor) -> Anchor:
        signed.append(replace(anchor, public_key="ab" * 32, signature="cd" * 64))
        return signed[-1]

    state = store.create_agent(record(), [created(), *batch(0)], at=T0, sign=sign)
    assert store.get_anchor("ag_1") == signed[0]
    assert (signed[0].version, signed[0].head_hash) == (state.version, state.head_hash)


def test_each_append_replaces_the_agents_anchor_in_its_transaction(store: Store) -> None:
    from stead.store.anchors import Anchor, spec_digest, state_digest

    state = create(store)
    # creation stores the first anchor, checked up to its last event, pinning the spec
    sealed_spec = spec_digest(record().spec)
    assert store.get_anchor("ag_1") == Anchor(
        "ag_1", state.version, state.head_hash, state_digest(state), state.version,
        spec_hash=sealed_spec,
    )  # fmt: skip
    state = commit_batches(store, state, 1)
    anchor = store.get_anchor("ag_1")
    assert anchor == Anchor("ag_1", state.version, state.head_hash, state_digest(state))
    assert state_digest(store.load_state("ag_1")) == anchor.state_hash
    # an anchor given with the events is stored exactly as given
    sealed = seal("ag_1", state.version + 1, state.head_hash, T0 + 9, 0, batch(7))
    new_state = fold(sealed, state)
    given = Anchor.of(new_state, verified=state.version, spec_hash=sealed_spec, epoch=7)
    given = Anchor(**{**given.to_json(), "public_key": "ab" * 32, "signature": "cd" * 64})
    store.append(
        sealed, new_state, expected_version=state.version, epoch=0, at=T0 + 9, anchor=given
    )
    assert store.get_anchor("ag_1") == given
    # a refused write leaves the anchor as it was
    lease = store.acquire_lease("ag_1", "w", TTL, T0 + 10)
    with pytest.raises(StaleEpoch):
        store.commit(new_state, batch(8), epoch=lease.epoch - 1, at=T0 + 11)
    assert store.get_anchor("ag_1") == given
    with pytest.raises(NotFound):
        store.get_anchor("ag_missing")
