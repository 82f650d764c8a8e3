"""Stores: one interface, chosen by URL.

``memory:`` gives the in-memory reference store; ``sqlite:///PATH`` a SQLite file
(``sqlite:///.stead/stead.db`` is relative to the current folder,
``sqlite:////var/lib/stead.db`` absolute); ``postgresql://HOST/DB?schema=NAME`` a
schema of a PostgreSQL database (the form in :mod:`stead.store.postgres_url`).
Backends are imported only when used.
"""

from __future__ import annotations

from ..errors import UsageError
from ..extras import need
from .base import AgentRecord, AgentSummary, Lease, Store

DEFAULT_URL = "sqlite:///.stead/stead.db"

__all__ = ["DEFAULT_URL", "AgentRecord", "AgentSummary", "Lease", "Store", "open_store"]


def open_store(url: str, create: bool = True) -> Store:
    """Open the store a URL names; without ``create``, one that does not exist is refused."""
    if url in ("memory:", "memory://"):
        from .memory import MemoryStore

        return MemoryStore()
    if url.startswith("sqlite:///"):
        from .sqlite import SqliteStore

        path = url[len("sqlite:///") :]
        if not path:
            raise UsageError("the SQLite URL names no file; use sqlite:///PATH/TO/stead.db")
        return SqliteStore(path, create=create)
    if url.startswith(("postgresql://", "postgres://")):
        need("psycopg", "postgres", "a PostgreSQL store")
        from .postgres import PostgresStore

        return PostgresStore(url, create=create)
    raise UsageError(
        f"unknown store URL {url!r}; use sqlite:///PATH (the default is "
        f"{DEFAULT_URL}), postgresql://HOST/DATABASE?schema=NAME, or memory: for a "
        "throwaway store"
    )


def data_dir_for(url: str) -> str | None:
    """The folder beside a file-backed store where blobs and workspaces live."""
    if url.startswith("sqlite:///"):
        from pathlib import Path

        return str(Path(url[len("sqlite:///") :]).parent)
    return None
