"""Every backend says which stead made it: ``Store.history()`` on a new store.

How a history grows when an older store is migrated, and how a newer one is
refused, is backend by backend (tests/store/test_sqlite.py, test_postgres.py).
"""

from __future__ import annotations

import time

from stead import __version__
from stead.store.base import AgentRecord, Store
from stead.store.scoped import TenantStore


def test_a_new_store_says_this_stead_made_it_at_its_schema_version(store: Store) -> None:
    after = time.time()
    rows = store.history()
    assert [r.schema_version for r in rows] == list(range(1, store.schema_version + 1))
    assert {r.stead_version for r in rows} == {__version__}
    assert all(after - 60 < r.applied_at <= after for r in rows)


def test_using_a_store_adds_nothing_to_its_history(store: Store) -> None:
    before = store.history()
    store.create_agent(AgentRecord("ag_h", "t1", "n", {"name": "n"}, 1.0), [], at=1.0)
    assert store.history() == before
    assert TenantStore(store, "t1").history() == before  # a tenant's view shows the same
