"""The store conformance suite runs every test once per backend.

To add a backend, add one line to ``BACKENDS``: its name and a function from
pytest's ``tmp_path`` to a fresh, empty store, or to a context manager that
gives one and cleans up after it (PostgreSQL's schema of its own is dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from tests.postgres import postgres_store

from stead.store.base import Store
from stead.store.memory import MemoryStore
from stead.store.sqlite import SqliteStore

BACKENDS: dict[str, Callable[[Path], AbstractContextManager[Store]]] = {
    "memory": lambda tmp: MemoryStore(),
    "sqlite": lambda tmp: SqliteStore(tmp / "stead.db"),
    "postgres": lambda tmp: postgres_store(),
}


@pytest.fixture(params=list(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend in turn, closed afterwards."""
    with BACKENDS[request.param](tmp_path) as s:
        yield s
