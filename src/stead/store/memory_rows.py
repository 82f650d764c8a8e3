"""Long-term memories as rows: text, provenance and the vector recall searches.

A memory (:class:`MemoryRow`) belongs to one tenant and to one owner there: an
agent (its id) or the tenant's shared memory (:data:`SHARED`). Every read and
write names the tenant, and no statement reads a row without filtering on it,
so one tenant's memories cannot be listed, recalled, corrected or forgotten
through another's (tests/attacks/test_memories.py).

The vector is the embedder's, normalised and kept as float32 bytes
(:mod:`stead.memories.vectors`); ``changed`` counts every write to an owner's
memories, so a process that keeps their vectors in memory for search
(:mod:`stead.memories.search`) knows from one indexed read whether they are
still current. A forgotten memory keeps its row, with no text and no vector,
so its id is never reused and a search cache sees the change.

Like schedules, these rows are not part of the tenant-narrowed
:class:`~stead.store.base.Store` interface; each backend mixes in its
:class:`MemoryRows`. Their table is made by SQLite's migration 14
(:data:`SQLITE_CREATE`) and PostgreSQL's 10 (:data:`POSTGRES_CREATE`).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..canonical import dumps, loads
from .sql_connections import SqlConnections

SHARED = "*shared"
"""The owner of a tenant's shared memories (no agent id starts with ``*``)."""

SQLITE_CREATE = """
    CREATE TABLE IF NOT EXISTS memories (
        memory_id TEXT PRIMARY KEY,
        tenant    TEXT NOT NULL,
        owner     TEXT NOT NULL,
        body      TEXT NOT NULL,
        embedder  TEXT NOT NULL,
        vector    BLOB NOT NULL,
        changed   INTEGER NOT NULL,
        forgotten INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS memories_owner ON memories (tenant, owner, changed);
"""
POSTGRES_CREATE = (
    SQLITE_CREATE.replace("TEXT", 'TEXT COLLATE "C"')
    .replace("BLOB", "BYTEA")
    .replace("INTEGER", "BIGINT")
)
_COLUMNS = "memory_id, tenant, owner, body, embedder, vector, changed, forgotten"


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One memory as stored.

    ``source`` is where its text came from: ``person`` (a person wrote it),
    ``trusted`` (values a person gave), ``model`` (the model's own words) or
    ``untrusted`` (text of an untrusted result, :mod:`stead.integrity.dataflow`);
    ``provenance`` says more (the call and the results that fed it)."""

    memory_id: str
    tenant: str
    owner: str
    text: str
    source: str
    embedder: str
    vector: bytes = b""
    provenance: dict[str, Any] | None = None
    made_by: str = ""
    made_at: float = 0.0
    changed_at: float = 0.0
    forgotten: bool = False
    changed: int = 0
    seal: str = ""
    """The vault's mark over its id, place, text and source (stead.memories.book):
    a row written or edited without the vault key does not carry a valid one."""

    @property
    def untrusted(self) -> bool:
        return self.source == "untrusted"

    def to_json(self) -> dict[str, Any]:
        """What a person, the API and the page are shown (no vector)."""
        return {
            "memory_id": self.memory_id,
            "owner": "shared" if self.owner == SHARED else self.owner,
            "text": self.text,
            "source": self.source,
            "provenance": self.provenance or {},
            "made_by": self.made_by,
            "made_at": self.made_at,
            "changed_at": self.changed_at,
            "embedder": self.embedder,
        }


def _body(row: MemoryRow) -> str:
    return dumps(
        {
            "text": row.text,
            "source": row.source,
            "provenance": row.provenance or {},
            "made_by": row.made_by,
            "made_at": row.made_at,
            "changed_at": row.changed_at,
            "seal": row.seal,
        }
    )


def _row(values: Sequence[Any], with_vector: bool) -> MemoryRow:
    mid, tenant, owner, body, embedder, vector, changed, forgotten = values
    b = loads(body)
    return MemoryRow(
        memory_id=mid,
        tenant=tenant,
        owner=owner,
        text=str(b.get("text", "")),
        source=str(b.get("source", "untrusted")),
        embedder=embedder,
        vector=bytes(vector) if with_vector else b"",
        provenance=dict(b.get("provenance") or {}),
        made_by=str(b.get("made_by", "")),
        made_at=float(b.get("made_at", 0.0)),
        changed_at=float(b.get("changed_at", 0.0)),
        forgotten=bool(forgotten),
        changed=int(changed),
        seal=str(b.get("seal", "")),
    )


class MemoryRows(abc.ABC):
    """The memory rows of a store, always read and written for one tenant."""

    @abc.abstractmethod
    def put_memory(self, row: MemoryRow) -> int:
        """Store ``row`` (a new one, or a new text for its id), returning its
        ``changed`` count. Refused (``ValueError``) when the id is another
        tenant's or another owner's, or was forgotten."""

    @abc.abstractmethod
    def get_memory(self, tenant: str, memory_id: str) -> MemoryRow | None:
        """The tenant's memory of that id, with its vector, or None (forgotten: None)."""

    @abc.abstractmethod
    def list_memories(
        self, tenant: str, owners: Sequence[str], vectors: bool = False
    ) -> list[MemoryRow]:
        """The tenant's memories of these owners, not forgotten, oldest id first."""

    @abc.abstractmethod
    def forget_memory(self, tenant: str, memory_id: str, at: float) -> MemoryRow | None:
        """Forget the tenant's memory: its text and vector are erased. The row as it
        was, or None if there was none."""

    @abc.abstractmethod
    def memory_stamp(self, tenant: str, owner: str) -> int:
        """The highest ``changed`` of the owner's memories (0: none ever)."""

    @abc.abstractmethod
    def memories_since(self, tenant: str, owner: str, after: int) -> list[MemoryRow]:
        """The owner's memories written after ``changed`` = ``after``, with their
        vectors, forgotten ones too (no text, no vector), in the order written."""


class InMemoryMemoryRows(MemoryRows):
    """:class:`MemoryRows` in a dict, for the memory store."""

    def __init__(self) -> None:
        self._memory_lock = threading.RLock()
        self._memories: dict[str, MemoryRow] = {}

    def put_memory(self, row: MemoryRow) -> int:
        with self._memory_lock:
            old = self._memories.get(row.memory_id)
            _check_put(old, row)
            changed = self.memory_stamp(row.tenant, row.owner) + 1
            self._memories[row.memory_id] = replace(row, changed=changed, forgotten=False)
            return changed

    def get_memory(self, tenant: str, memory_id: str) -> MemoryRow | None:
        with self._memory_lock:
            row = self._memories.get(memory_id)
        return row if row is not None and row.tenant == tenant and not row.forgotten else None

    def list_memories(
        self, tenant: str, owners: Sequence[str], vectors: bool = False
    ) -> list[MemoryRow]:
        with self._memory_lock:
            found = [
                r
                for r in self._memories.values()
                if r.tenant == tenant and r.owner in owners and not r.forgotten
            ]
        found.sort(key=lambda r: r.memory_id)
        return found if vectors else [replace(r, vector=b"") for r in found]

    def forget_memory(self, tenant: str, memory_id: str, at: float) -> MemoryRow | None:
        with self._memory_lock:
            row = self.get_memory(tenant, memory_id)
            if row is None:
                return None
            changed = self.memory_stamp(tenant, row.owner) + 1
            self._memories[memory_id] = replace(
                row, text="", vector=b"", forgotten=True, changed=changed, changed_at=at
            )
            return row

    def memories_since(self, tenant: str, owner: str, after: int) -> list[MemoryRow]:
        with self._memory_lock:
            found = [r for r in self._memories.values()
                     if (r.tenant, r.owner) == (tenant, owner) and r.changed > after]  # fmt: skip
        return sorted(found, key=lambda r: r.changed)

    def memory_stamp(self, tenant: str, owner: str) -> int:
        with self._memory_lock:
            return max(
                (
                    r.changed
                    for r in self._memories.values()
                    if (r.tenant, r.owner) == (tenant, owner)
                ),
                default=0,
            )


def _check_put(old: MemoryRow | None, row: MemoryRow) -> None:
    if old is None:
        return
    if (old.tenant, old.owner) != (row.tenant, row.owner):
        raise ValueError(f"memory {row.memory_id} is not this owner's; it cannot be replaced")
    if old.forgotten:
        raise ValueError(f"memory {row.memory_id} was forgotten; save a new memory instead")


_ONE_LIVE = f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND memory_id = ? AND forgotten = 0"
"""One memory of a tenant's that is not forgotten: read alone, or to forget it."""


class SqlMemoryRows(MemoryRows, SqlConnections):
    """:class:`MemoryRows` for the SQL backends (their connections:
    :class:`~stead.store.sql_connections.SqlConnections`)."""

    def put_memory(self, row: MemoryRow) -> int:
        with self._tx() as db:
            old = db.execute(
                self._q(f"SELECT {_COLUMNS} FROM memories WHERE memory_id = ?"), (row.memory_id,)
            ).fetchone()
            _check_put(None if old is None else _row(old, False), row)
            self._lock_owner(db, row.tenant, row.owner)
            changed = self._stamp(db, row.tenant, row.owner) + 1
            values = (row.tenant, row.owner, _body(row), row.embedder, row.vector, changed)
            if old is None:
                db.execute(
                    self._q(f"INSERT INTO memories ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, 0)"),
                    (row.memory_id, *values),
                )
            else:
                db.execute(
                    self._q(
                        "UPDATE memories SET tenant = ?, owner = ?, body = ?, embedder = ?, "
                        "vector = ?, changed = ? WHERE memory_id = ?"
                    ),
                    (*values, row.memory_id),
                )
            return changed

    def get_memory(self, tenant: str, memory_id: str) -> MemoryRow | None:
        with self._token_read() as db:
            found = db.execute(
                self._q(_ONE_LIVE),
                (tenant, memory_id),
            ).fetchone()
        return None if found is None else _row(found, True)

    def list_memories(
        self, tenant: str, owners: Sequence[str], vectors: bool = False
    ) -> list[MemoryRow]:
        if not owners:
            return []
        marks = ", ".join("?" * len(owners))
        columns = _COLUMNS if vectors else _COLUMNS.replace("vector", "NULL")
        with self._token_read() as db:
            found = db.execute(
                self._q(
                    f"SELECT {columns} FROM memories WHERE tenant = ? AND owner IN ({marks}) "
                    "AND forgotten = 0 ORDER BY memory_id"
                ),
                (tenant, *owners),
            ).fetchall()
        return [_row(r, vectors) for r in found]

    def forget_memory(self, tenant: str, memory_id: str, at: float) -> MemoryRow | None:
        with self._tx() as db:
            found = db.execute(
                self._q(_ONE_LIVE),
                (tenant, memory_id),
            ).fetchone()
            if found is None:
                return None
            row = _row(found, False)
            self._lock_owner(db, tenant, row.owner)
            gone = replace(row, text="", changed_at=at)
            db.execute(
                self._q(
                    "UPDATE memories SET body = ?, vector = ?, forgotten = 1, changed = ? "
                    "WHERE tenant = ? AND memory_id = ?"
                ),
                (_body(gone), b"", self._stamp(db, tenant, row.owner) + 1, tenant, memory_id),
            )
            return row

    def memory_stamp(self, tenant: str, owner: str) -> int:
        with self._token_read() as db:
            return self._stamp(db, tenant, owner)

    def memories_since(self, tenant: str, owner: str, after: int) -> list[MemoryRow]:
        with self._token_read() as db:
            found = db.execute(
                self._q(
                    f"SELECT {_COLUMNS} FROM memories WHERE tenant = ? AND owner = ? "
                    "AND changed > ? ORDER BY changed"
                ),
                (tenant, owner, after),
            ).fetchall()
        return [_row(r, True) for r in found]

    def _lock_owner(self, db: Any, tenant: str, owner: str) -> None:
        """Writers to one owner's memories, one at a time until each commits, so their
        ``changed`` counts are distinct and become visible in order (a search that
        read count N has seen every write up to N). SQLite has one writer already."""
        if self._param == "%s":
            key = f"memories/{tenant}/{owner}"
            db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))

    def _stamp(self, db: Any, tenant: str, owner: str) -> int:
        found = db.execute(
            self._q("SELECT max(changed) FROM memories WHERE tenant = ? AND owner = ?"),
            (tenant, owner),
        ).fetchone()
        return int(found[0] or 0)
