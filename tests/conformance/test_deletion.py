"""Deleting an agent's rows (:meth:`Store.delete_agent`), on every backend: all of the
agent's own rows go in one transaction, nothing of any other agent or tenant does,
and a live lease refuses it."""

from __future__ import annotations

import pytest
from tests.conformance.test_store_conformance import T0, TTL, commit_batches, create

from stead.errors import LeaseHeld, NotFound
from stead.store.base import Store
from stead.store.scoped import TenantStore


def test_deleting_an_agent_removes_its_rows_and_no_one_else_s(store: Store) -> None:
    commit_batches(store, create(store, "ag_1"), 2)
    other = commit_batches(store, create(store, "ag_2"), 2)
    elsewhere = create(store, "ag_3", tenant="t2")
    store.put_secret("t1", "ag_1", "MINE", "sealed-1", T0)
    store.put_secret("t1", "", "TENANT_WIDE", "sealed-2", T0)
    store.put_secret("t1", "ag_2", "MINE", "sealed-3", T0)
    lease = store.acquire_lease("ag_1", "w1", TTL, T0)
    store.release_lease(lease)

    store.delete_agent("ag_1", T0 + 1)

    with pytest.raises(NotFound):
        store.get_record("ag_1")
    with pytest.raises(NotFound):
        store.load_state("ag_1")
    assert _no_journal(store, "ag_1")
    assert store.get_lease("ag_1") is None
    assert store.get_secret("t1", "ag_1", "MINE") is None
    assert store.get_secret("t1", "", "TENANT_WIDE") == "sealed-2"
    assert store.get_secret("t1", "ag_2", "MINE") == "sealed-3"
    assert [a.agent_id for a in store.list_agents()] == ["ag_2", "ag_3"]
    assert store.load_state("ag_2") == other
    assert store.load_state("ag_3") == elsewhere
    assert "ag_1" not in store.agents_to_run(T0 + 2)
    # its id is free again, and a new agent by it starts a journal of its own
    assert create(store, "ag_1").version == 1


def _no_journal(store: Store, agent_id: str) -> bool:
    """Whether nothing of the agent's journal is left (read as empty, or not found)."""
    try:
        return list(store.read_events(agent_id)) == []
    except NotFound:
        return True


def test_a_live_lease_refuses_the_deletion_and_nothing_is_lost(store: Store) -> None:
    state = commit_batches(store, create(store, "ag_1"), 1)
    store.acquire_lease("ag_1", "w1", TTL, T0)
    with pytest.raises(LeaseHeld, match="cancel it first"):
        store.delete_agent("ag_1", T0 + 1)
    assert store.load_state("ag_1") == state
    # once the lease has lapsed, it goes
    store.delete_agent("ag_1", T0 + TTL + 1)
    with pytest.raises(NotFound):
        store.get_record("ag_1")


def test_an_agent_that_is_not_there_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="stead ls"):
        store.delete_agent("ag_nobody", T0)


def test_a_tenant_cannot_delete_another_tenant_s_agent(store: Store) -> None:
    create(store, "ag_1", tenant="t1")
    with pytest.raises(NotFound):
        TenantStore(store, "t2").delete_agent("ag_1", T0)
    assert store.get_record("ag_1").tenant == "t1"
    TenantStore(store, "t1").delete_agent("ag_1", T0)
    assert store.list_agents() == []
