"""Group commit (``Store.append_many``) on every backend: each batch is checked on its
own, a refused one is left out and reported, and every other one is stored whole,
with its state row and its anchor, in the one transaction."""

from __future__ import annotations

import dataclasses

from tests.conformance.test_store_conformance import T0, TTL, batch, create, events

from stead.errors import NotFound, StaleEpoch, StoreError, VersionConflict
from stead.journal import seal
from stead.state import State, fold
from stead.store.anchors import Anchor
from stead.store.base import Batch, Store
from stead.store.memory import MemoryStore


def next_batch(state: State, i: int, epoch: int, at: float) -> Batch:
    """The batch an activation would hand the committer after ``state``."""
    sealed = seal(state.agent_id, state.version + 1, state.head_hash, at, epoch, batch(i))
    after = fold(sealed, state)
    return Batch(sealed, after, state.version, epoch, Anchor.of(after, epoch=epoch))


def test_a_group_stores_the_good_batches_and_refuses_each_bad_one_alone(store: Store) -> None:
    states = {n: create(store, f"ag_{n}") for n in range(1, 7)}
    epochs = {n: store.acquire_lease(f"ag_{n}", f"w{n}", TTL, T0).epoch for n in states}
    store.acquire_lease("ag_2", "w-new", TTL, T0 + 2 * TTL)  # ag_2's writer is fenced off
    moved = next_batch(states[4], 9, epochs[4], T0 + 1)
    store.append_many([moved], T0 + 1)  # ag_4 moved on: a batch from before conflicts
    good = next_batch(states[3], 1, epochs[3], T0 + 2)
    broken = next_batch(states[5], 1, epochs[5], T0 + 2)
    broken = dataclasses.replace(broken, events=[broken.events[0], *broken.events[2:]])
    batches = [
        next_batch(states[1], 1, epochs[1], T0 + 2),
        next_batch(states[2], 1, epochs[2], T0 + 2),  # stale epoch
        good,
        next_batch(states[4], 1, epochs[4], T0 + 2),  # stale version
        broken,  # a gap in its chain
        next_batch(states[6], 1, epochs[6], T0 + 2),
        next_batch(create(MemoryStore(), "ag_x"), 1, 0, T0 + 2),  # an agent not stored
    ]
    results = store.append_many(batches, T0 + 2)
    assert results[0] is None and results[2] is None and results[5] is None
    assert isinstance(results[1], StaleEpoch)
    assert isinstance(results[3], VersionConflict)
    assert isinstance(results[4], StoreError) and "continue the chain" in str(results[4])
    assert isinstance(results[6], NotFound) and "ag_x" in str(results[6])
    for n, i in ((1, 0), (3, 2), (6, 5)):
        b = batches[i]
        assert store.load_state(f"ag_{n}").to_json() == b.state.to_json()
        assert events(store, f"ag_{n}")[1:] == list(b.events)
        anchor = store.get_anchor(f"ag_{n}")
        assert anchor is not None and anchor.version == b.state.version
        assert anchor.head_hash == b.state.head_hash and anchor.epoch == b.epoch
    for n in (2, 5):
        assert store.load_state(f"ag_{n}").to_json() == states[n].to_json()
        assert len(events(store, f"ag_{n}")) == 1
    assert store.load_state("ag_4").to_json() == moved.state.to_json()


def test_two_batches_of_one_agent_in_a_group_are_stored_in_turn(store: Store) -> None:
    """The second is checked against the first's outcome, as if written after it."""
    state = create(store)
    epoch = store.acquire_lease("ag_1", "w1", TTL, T0).epoch
    first = next_batch(state, 1, epoch, T0 + 1)
    second = next_batch(first.state, 2, epoch, T0 + 1)
    again = next_batch(state, 3, epoch, T0 + 1)  # also based on the first version
    results = store.append_many([first, again, second], T0 + 1)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], VersionConflict)
    assert store.load_state("ag_1").to_json() == second.state.to_json()
    assert events(store)[1:] == [*first.events, *second.events]
    anchor = store.get_anchor("ag_1")
    assert anchor is not None and anchor.version == second.state.version


def test_a_group_of_refused_batches_only_stores_nothing(store: Store) -> None:
    state = create(store)
    before = store.load_state("ag_1").to_json()
    (refused,) = store.append_many([next_batch(state, 1, 7, T0 + 1)], T0 + 1)
    assert isinstance(refused, StaleEpoch)
    assert store.load_state("ag_1").to_json() == before
    assert len(events(store)) == 1
