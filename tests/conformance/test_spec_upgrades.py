"""The store's spec-upgrade contract (see ``stead.store.base.upgraded_spec``), on every
backend: a ``spec_upgraded`` event replaces the agent's ``spec`` column in the
transaction that stores it, and a refused write changes neither."""

from __future__ import annotations

from typing import Any

import pytest

from stead.errors import StaleEpoch, VersionConflict
from stead.journal import Kind, NewEvent, seal
from stead.state import State, fold
from stead.store.anchors import spec_digest
from stead.store.base import AgentRecord, Batch, Store

T0 = 1_767_225_600.0
OLD = {"name": "s", "tenant": "t1", "instructions": "v1", "tools": ["read_file"]}
NEW = {**OLD, "instructions": "v2", "tools": ["read_file", "list_files"]}


def create(store: Store, agent_id: str) -> State:
    return store.create_agent(
        AgentRecord(agent_id, "t1", agent_id, dict(OLD), T0),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": "t1", "name": agent_id})],
        at=T0,
    )


def upgraded(spec: dict[str, Any], previous: dict[str, Any]) -> NewEvent:
    data = {"from": spec_digest(previous), "to": spec_digest(spec), "spec": spec,
            "previous": previous, "by": "ops"}  # fmt: skip
    return NewEvent(Kind.SPEC_UPGRADED, data)


def test_an_upgrade_event_replaces_the_spec_column_with_it(store: Store) -> None:
    state = create(store, "ag_1")
    _, after = store.commit(state, [upgraded(NEW, OLD)], epoch=0, at=T0 + 1)
    assert store.get_record("ag_1").spec == NEW
    assert store.load_state("ag_1").spec_digest == spec_digest(NEW) == after.spec_digest
    # and back again, by a second event (a rollback)
    store.commit(after, [upgraded(OLD, NEW)], epoch=0, at=T0 + 2)
    assert store.get_record("ag_1").spec == OLD
    assert store.load_state("ag_1").spec_digest == spec_digest(OLD)


def test_a_refused_write_changes_no_spec(store: Store) -> None:
    state = create(store, "ag_1")
    store.commit(state, [NewEvent(Kind.INPUT_RECEIVED, {"text": "hi", "by": "p"})], epoch=0,
                 at=T0 + 1)  # fmt: skip
    with pytest.raises(VersionConflict):  # based on a version no longer stored
        store.commit(state, [upgraded(NEW, OLD)], epoch=0, at=T0 + 2)
    assert store.get_record("ag_1").spec == OLD
    lease = store.acquire_lease("ag_1", "w1", 30, T0 + 3)
    with pytest.raises(StaleEpoch):  # under an epoch that is not the lease's
        store.commit(store.load_state("ag_1"), [upgraded(NEW, OLD)], epoch=lease.epoch - 1,
                     at=T0 + 4)  # fmt: skip
    assert store.get_record("ag_1").spec == OLD
    assert store.load_state("ag_1").spec_digest == ""


def test_a_group_commit_upgrades_only_the_batches_it_keeps(store: Store) -> None:
    states = [create(store, f"ag_{n}") for n in (1, 2, 3)]
    # ag_2 moves on, so its batch below is based on a version no longer stored
    store.commit(states[1], [NewEvent(Kind.INPUT_RECEIVED, {"text": "x", "by": "p"})],
                 epoch=0, at=T0 + 1)  # fmt: skip
    batches = []
    for s in states:
        sealed = seal(s.agent_id, s.version + 1, s.head_hash, T0 + 2, 0, [upgraded(NEW, OLD)])
        batches.append(Batch(sealed, fold(sealed, s), s.version, 0))
    results = store.append_many(batches, T0 + 2)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], VersionConflict)
    assert [store.get_record(f"ag_{n}").spec for n in (1, 2, 3)] == [NEW, OLD, NEW]
