"""Which stead made a store, and which migrated it: the ``store_history`` table.

Each migration a stead applies gets a row, in the transaction that applies it:
the schema version it brought the store to, the stead version that applied it
(``stead.__version__``), and when (seconds since the epoch, UTC: a store has
no clock of its own, so this is the machine's). A new store's rows begin at
schema version 1, so its first row says which stead made it. A store made
before the table existed gains rows only from the migration that adds the
table onwards: what applied the versions before it was never written down,
and a row saying so would be a guess.

Opening a store that is up to date writes nothing here. Reading is kept to
plain ``SELECT`` s, so that the refusal of a newer store can say which stead
made it without writing to it.

The table's shape is read by every later stead (to name, in its refusal, the
stead that wrote a store newer than itself): it is never altered, only added to.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import SchemaTooNew
from ..version import __version__

SQLITE_CREATE = """
CREATE TABLE IF NOT EXISTS store_history (
    schema_version INTEGER PRIMARY KEY,
    stead_version  TEXT NOT NULL,
    applied_at     REAL NOT NULL
)
"""

POSTGRES_CREATE = """
CREATE TABLE IF NOT EXISTS store_history (
    schema_version INTEGER PRIMARY KEY,
    stead_version  TEXT NOT NULL,
    applied_at     DOUBLE PRECISION NOT NULL
)
"""


class _Db(Protocol):
    """What is used of a connection: sqlite3's and psycopg's both have it."""

    def execute(self, query: Any, params: Any = ...) -> Any: ...


@dataclass(frozen=True)
class HistoryEntry:
    """One migration applied to a store: the schema version it brought the store to,
    the stead version that applied it, and when (seconds since the epoch)."""

    schema_version: int
    stead_version: str
    applied_at: float


def stead_version() -> str:
    """This stead's version."""
    return __version__


def record(db: _Db, mark: str, versions: Iterable[int], at: float | None = None) -> None:
    """Add a row for each of ``versions``, applied now by this stead, in the caller's
    transaction. A version applied again (a row already there) is re-recorded."""
    when = time.time() if at is None else at
    mine = stead_version()
    for version in versions:
        db.execute(
            "INSERT INTO store_history (schema_version, stead_version, applied_at) "
            f"VALUES ({mark}, {mark}, {mark}) ON CONFLICT (schema_version) DO UPDATE SET "
            "stead_version = excluded.stead_version, applied_at = excluded.applied_at",
            (version, mine, when),
        )


def read(db: _Db) -> list[HistoryEntry]:
    """The rows of a store whose ``store_history`` table exists, oldest first."""
    rows = db.execute(
        "SELECT schema_version, stead_version, applied_at FROM store_history "
        "ORDER BY schema_version"
    ).fetchall()
    return [HistoryEntry(int(v), str(s), float(a)) for v, s, a in rows]


def too_new(where: str, current: int, known: int, entries: Sequence[HistoryEntry]) -> SchemaTooNew:
    """The refusal of a store at schema ``current`` by a stead that knows up to ``known``,
    naming the stead that wrote its newest schema when its history says."""
    by = next((e.stead_version for e in entries if e.schema_version == current), None)
    made = f"made by stead {by}" if by else "made by a newer stead"
    upgrade = f"upgrade stead to at least {by}" if by else "upgrade stead"
    return SchemaTooNew(
        f"{where} has schema version {current}, {made}; this stead ({stead_version()}) "
        f"understands versions up to {known}: {upgrade} before opening it "
        "(it was not changed)"
    )
