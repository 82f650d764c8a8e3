"""The store conformance suite runs every test once per backend.

To add a backend, add one line to ``BACKENDS``: its name and a function from
pytest's ``tmp_path`` to a fresh, empty store, for example::

    "postgres": lambda tmp: PostgresStore(os.environ["STEAD_TEST_POSTGRES_URL"]),
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stead.store.base import Store
from stead.store.memory import MemoryStore
from stead.store.sqlite import SqliteStore

BACKENDS: dict[str, Callable[[Path], Store]] = {
    "memory": lambda tmp: MemoryStore(),
    "sqlite": lambda tmp: SqliteStore(tmp / "stead.db"),
}


@pytest.fixture(params=list(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend in turn."""
    s = BACKENDS[request.param](tmp_path)
    yield s
    s.close()
