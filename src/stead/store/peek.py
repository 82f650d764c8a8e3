"""What a store says of its schema, read without opening it as a store.

Opening a store migrates it; ``stead doctor`` must be able to say which stead
made a store, and which last migrated it, before anyone decides to upgrade it.
So this connects to the store's file or schema, reads its version and its
history (:mod:`stead.store.history`) with plain ``SELECT`` s, and lets go:
nothing is migrated, made or written, and a store that a newer stead wrote is
described rather than refused.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreUnusable, UsageError
from ..extras import need
from .history import HistoryEntry


@dataclass(frozen=True)
class SchemaInfo:
    """A store's schema version, the newest this stead understands for its backend,
    and its history, oldest first (empty for a store made before it was kept)."""

    schema_version: int
    understands: int
    history: list[HistoryEntry]

    @property
    def made_by(self) -> str | None:
        """The stead that made the store, if its history goes back to its making."""
        first = self.history[0] if self.history else None
        return first.stead_version if first and first.schema_version == 1 else None

    @property
    def last(self) -> HistoryEntry | None:
        """The newest migration recorded, if any is."""
        return self.history[-1] if self.history else None


def peek(url: str) -> SchemaInfo | None:
    """The schema of the store at ``url``; None for a store that is not there (or
    ``memory:``, which has no schema). Another program's database is refused."""
    if url in ("memory:", "memory://"):
        return None
    if url.startswith("sqlite:///"):
        return _peek_sqlite(Path(url[len("sqlite:///") :]))
    if url.startswith(("postgresql://", "postgres://")):
        need("psycopg", "postgres", "a PostgreSQL store")
        return _peek_postgres(url)
    raise UsageError(f"unknown store URL {url!r}; use sqlite:///PATH or postgresql://…")


def shown(url: str) -> str:
    """The store's URL as messages show it: a PostgreSQL one without its credentials."""
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from . import postgres_url

            return postgres_url.parse(url).where
        except (ImportError, UsageError):
            return url.split("@")[-1].split("?")[0]
    return url


def _peek_sqlite(path: Path) -> SchemaInfo | None:
    from .sqlite_migrations import MIGRATIONS
    from .sqlite_open import BUSY_TIMEOUT_MS, read_history, recorded_version

    if not path.is_file():
        return None  # connecting would make the file
    try:
        # a plain connection, not a read-only one: that would leave -wal and -shm behind
        db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            version = recorded_version(db)
            if version is None:
                return None
            return SchemaInfo(version, len(MIGRATIONS), read_history(db))
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise StoreUnusable(f"cannot read {path} as a stead store: {exc}") from None


def _peek_postgres(url: str) -> SchemaInfo | None:
    import psycopg

    from . import postgres_url
    from .postgres_migrations import MIGRATIONS, read_history, recorded_version

    target = postgres_url.parse(url)
    try:
        with psycopg.connect(target.conninfo, autocommit=True) as db:
            version = recorded_version(db)
            if version is None:
                return None
            return SchemaInfo(version, len(MIGRATIONS), read_history(db))
    except psycopg.Error as exc:
        reason = postgres_url.reason(exc)
        raise StoreUnusable(
            f"cannot read the PostgreSQL store {target.where}: {reason}; check that the "
            "server runs and can be reached"
        ) from None
