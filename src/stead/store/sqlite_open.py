"""Opening a SQLite store's file: the connection, its pragmas, and its schema.

The order matters. A database that a newer stead wrote, or that belongs to
another program, is refused before anything (not even the switch to WAL) is
written to it; only then are the pragmas set and the migrations of
:mod:`stead.store.sqlite_migrations` applied, all of them in one transaction.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import StoreUnusable
from . import history
from .sqlite_migrations import MIGRATIONS, apply_migrations

BUSY_TIMEOUT_MS = 10_000


def no_store(path: Path) -> StoreUnusable:
    """The refusal of a store that is not there (for a command that only reads)."""
    return StoreUnusable(f"there is no store at {path}; check --store (or $STEAD_STORE)")


def connect(path: str | Path, create: bool) -> sqlite3.Connection:
    """A connection to the store at ``path``, its schema brought up to this stead's.

    Without ``create`` a missing file is refused, and nothing (not even its
    folder) is made: a command that only reads must not leave a store behind.
    """
    where = Path(path)
    if str(path) != ":memory:":
        if not create and not where.is_file():
            raise no_store(where)
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnusable(
                f"cannot make the folder of the store {where}: {exc.strerror}"
            ) from None
    try:
        db = sqlite3.connect(
            str(path),
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
    except sqlite3.Error as exc:
        raise StoreUnusable(f"cannot open SQLite database {path}: {exc}") from None
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # refuse a newer database before anything (even the WAL switch) writes to it
        _refuse_newer(db, where, create)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        _migrate(db, where)
    except sqlite3.DatabaseError as exc:
        # garbage, a truncated file, a lock held past the timeout, a read-only file
        db.close()
        raise StoreUnusable(
            f"cannot use {where} as a stead store: {exc}; name a stead database "
            "that is readable, writable and not locked by another program"
        ) from None
    except BaseException:
        db.close()
        raise
    return db


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return found.fetchone() is not None


def recorded_version(db: sqlite3.Connection) -> int | None:
    """The schema version the database records (None: it has no stead schema)."""
    if not _has_table(db, "schema_migrations"):
        return None
    row = db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
    return int(row[0])


def _refuse_newer(db: sqlite3.Connection, where: Path, create: bool) -> None:
    version = recorded_version(db)
    if version is not None:
        _check_version(db, version, where)
        return
    other = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' LIMIT 1").fetchone()
    if other is None and not create:  # an empty file: a read command makes no store of it
        raise no_store(where)
    if other is not None:
        # another program's database: adding stead's tables to it would change it
        raise StoreUnusable(
            f"{where} is not a stead store (it has a table {other[0]!r} but no "
            "stead schema); name a stead database or a new file"
        )


def read_history(db: sqlite3.Connection) -> list[history.HistoryEntry]:
    """The store's history (:mod:`stead.store.history`), read without writing; empty
    for a store made before it was kept."""
    return history.read(db) if _has_table(db, "store_history") else []


def _check_version(db: sqlite3.Connection, current: int, where: Path) -> None:
    if current > len(MIGRATIONS):
        raise history.too_new(f"the database {where}", current, len(MIGRATIONS), read_history(db))


def _migrate(db: sqlite3.Connection, where: Path) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        row = db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        current = int(row[0])
        _check_version(db, current, where)
        apply_migrations(db, current)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
