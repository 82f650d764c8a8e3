"""The SQLite backend: the embedded default.

Set up deliberately for many readers and one writer at a time:

* WAL journal, so readers never block the writer and a reader never sees half a
  transaction;
* ``synchronous=FULL``, so a commit that returned survives the process *and* the
  machine going away (the durability every benchmark is quoted at);
* every write in ``BEGIN IMMEDIATE``, so the write lock is taken up front and two
  writers queue on the busy timeout instead of deadlocking on a lock upgrade;
* a busy timeout long enough to ride out another process's commit;
* one connection per store object, used under a lock, so this process has one
  writer.

Opening the file (the pragmas, refusing a newer schema, migrating) is
:mod:`stead.store.sqlite_open`. Migrations are the ordered list in
:mod:`stead.store.sqlite_migrations`; the
version of each is recorded in ``schema_migrations`` in the same transaction,
and a database whose recorded version is newer than this code knows is refused.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .. import storefiles
from ..canonical import dumps, loads
from ..errors import (
    IntegrityError,
    LeaseHeld,
    NotFound,
    SteadError,
    StoreError,
)
from ..journal import Event
from ..notices import notices
from ..state import State
from . import codec, sqlite_anchors, sqlite_open, sqlite_snapshots
from .anchors import Anchor, state_row
from .base import (
    AgentRecord,
    AgentRow,
    AgentSummary,
    Batch,
    Lease,
    PolicyRecord,
    SnapshotRecord,
    Store,
    lease_held_message,
    renewal_refused,
    upgraded_spec,
    wake_at,
)
from .deletion import SqlDeletion
from .history import HistoryEntry
from .memory_rows import SqlMemoryRows
from .schedule_rows import SqlScheduleRows
from .sqlite_migrations import MIGRATIONS
from .statements import (
    SNAPSHOT_KINDS,
    SQLITE,
    SQLITE_ROW,
    SQLITE_ROWS,
    Stored,
    agent_rows,
    anchor_rows,
    plan,
)
from .tokens import SqlTokenRows
from .webhook_rows import SqlWebhookRows, sql_enqueue

INDEXED_KINDS = (
    "agent_created",
    "autonomy_changed",
    "grant_added",
    "grant_revoked",
    "completion_certified",
    "agent_forked",
    "agent_imported",
)
_INDEXED_SQL = ", ".join(f"'{k}'" for k in INDEXED_KINDS)
"""The event kinds in the partial index ``events_kind`` (migrations 3 and 5)."""
_PAGE = 2_000


class SqliteStore(SqlDeletion, sqlite_anchors.AnchorRows, SqlTokenRows, SqlWebhookRows,
                  SqlScheduleRows, SqlMemoryRows, Store):  # fmt: skip
    """A store in one SQLite file."""

    schema_version = len(MIGRATIONS)
    _param = "?"

    def __init__(self, path: str | Path, create: bool = True) -> None:
        """Open (with ``create``, make) the database at ``path``.

        Without ``create`` a missing file is refused, and nothing (not even its
        folder) is made: a command that only reads must not leave a store behind.
        """
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db = sqlite_open.connect(path, create)
        self._held = storefiles.hold(path)  # no other open of its files (stead.storefiles)

    # -- plumbing -------------------------------------------------------------

    @contextlib.contextmanager
    def _token_read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def recorded_schema_version(self) -> int:
        """The highest schema version recorded in the database."""
        with self._lock:
            row = self._db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    def history(self) -> list[HistoryEntry]:
        with self._lock:
            return sqlite_open.read_history(self._db)

    def close(self) -> None:
        with self._lock:
            self._db.close()
            self._held = storefiles.release(self._held)

    # -- agents ---------------------------------------------------------------

    def _create(
        self, record: AgentRecord, events: Sequence[Event], state: State, anchor: Anchor, at: float
    ) -> None:
        with self._tx() as db:
            taken = db.execute("SELECT 1 FROM agents WHERE agent_id = ?", (record.agent_id,))
            if taken.fetchone():
                raise StoreError(
                    f"an agent with id {record.agent_id} already exists; "
                    "choose another id or omit --id"
                )
            db.execute(
                "INSERT INTO agents (agent_id, tenant, name, spec, created_at, version, "
                "status, state, updated_at, wake_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.agent_id,
                    record.tenant,
                    record.name,
                    codec.pack(dumps(record.spec)),
                    record.created_at,
                    state.version,
                    state.status,
                    codec.pack_checkpoint(state_row(state, anchor), state.status),
                    at,
                    wake_at(state),
                ),
            )
            self._insert_events(db, events)
            sqlite_anchors.put(db, anchor)

    @staticmethod
    def _insert_events(db: sqlite3.Connection, events: Sequence[Event]) -> None:
        db.executemany(SQLITE.events_put, [_event_row(e) for e in events])

    def get_record(self, agent_id: str) -> AgentRecord:
        with self._lock:
            row = self._db.execute(
                "SELECT tenant, name, spec, created_at FROM agents WHERE agent_id = ?", (agent_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        spec = codec.unpack(row[2], f"agent {agent_id}'s spec", agent_id=agent_id)
        return AgentRecord(agent_id, row[0], row[1], loads(spec), row[3])

    def load_state(self, agent_id: str) -> State:
        with self._lock:
            row = self._db.execute(
                "SELECT state FROM agents WHERE agent_id = ?", (agent_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        return State.from_json(
            loads(codec.unpack(row[0], f"agent {agent_id}'s state row", agent_id=agent_id))
        )

    def get_row(self, agent_id: str) -> AgentRow:
        sql = "SELECT tenant, name, status, version, wake_at FROM agents WHERE agent_id = ?"
        with self._lock:
            row = self._db.execute(sql, (agent_id,)).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        return AgentRow(agent_id, row[0], row[1], row[2], int(row[3]), row[4])

    def list_agents(self, tenant: str | None = None) -> list[AgentSummary]:
        sql = "SELECT agent_id, tenant, name, status, version, updated_at FROM agents"
        params: tuple[str, ...] = ()
        if tenant is not None:
            sql += " WHERE tenant = ?"
            params = (tenant,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY agent_id", params).fetchall()
        return [AgentSummary(*row) for row in rows]

    # -- the journal ----------------------------------------------------------

    def _write(
        self,
        agent_id: str,
        events: Sequence[Event],
        state: State,
        *,
        expected_version: int,
        epoch: int,
        at: float,
        anchor: Anchor,
    ) -> None:
        with self._tx() as db:
            batch = Batch(events, state, expected_version, epoch, anchor)
            (refused,) = self._group(db, [batch], at)
        if refused is not None:
            raise refused

    def append_many(self, batches: Sequence[Batch], at: float) -> list[SteadError | None]:
        """Every batch in one transaction, so many agents' steps share one fsync.

        A batch that is refused (stale epoch, lost update, bad chain, a snapshot
        already restored) is left out and reported; the others are stored.
        """
        with self._tx() as db:
            return self._group(db, batches, at)

    def _group(
        self, db: sqlite3.Connection, batches: Sequence[Batch], at: float
    ) -> list[SteadError | None]:
        """The batches' agents read, each batch checked in Python (the transaction
        holds the database: no row can change meanwhile), and the kept ones written
        with one prepared statement per table (:mod:`stead.store.statements`)."""
        ids = sorted({b.events[0].agent_id for b in batches if b.events})
        read = (SQLITE_ROW, ids[0]) if len(ids) == 1 else (SQLITE_ROWS, json.dumps(ids))
        rows = {
            str(r[0]): Stored(int(r[1]), str(r[2]), r[3], int(r[4]))
            for r in db.execute(read[0], (read[1],))
        }
        kept, results = plan(batches, rows, functools.partial(_snapshots, db))
        if kept:
            db.executemany(SQLITE.events_put, [_event_row(e) for k in kept for e in k.batch.events])
            # the statement names the agent last, the rows first
            db.executemany(
                SQLITE.agents_put,
                [
                    (r[1], r[2], codec.pack_checkpoint(str(r[3]), str(r[2])), r[4], r[5], r[0])
                    for r in agent_rows(kept, at)
                ],
            )
            db.executemany(SQLITE.anchors_put, anchor_rows(kept))
            for k in kept:
                s = k.batch.state
                sql_enqueue(db, "?", s.tenant, notices(k.batch.events, k.before.status, s))
        return results

    # -- hibernation: the rows live in stead.store.sqlite_snapshots ---------------

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord:
        with self._lock:
            return sqlite_snapshots.get(self._db, snapshot_id)

    def list_snapshots(self, agent_id: str) -> list[SnapshotRecord]:
        self.get_record(agent_id)
        with self._lock:
            return sqlite_snapshots.of_agent(self._db, agent_id)

    def agents_to_run(self, now: float, tenant: str | None = None) -> list[str]:
        with self._lock:
            return sqlite_snapshots.agents_to_run(self._db, now, tenant)

    def idle_agents(self, before: float, tenant: str | None = None) -> list[str]:
        with self._lock:
            return sqlite_snapshots.idle_agents(self._db, before, tenant)

    def read_events(
        self, agent_id: str, from_seq: int = 1, to_seq: int | None = None
    ) -> Iterator[Event]:
        last = to_seq if to_seq is not None else 2**62
        seq = max(from_seq, 1)
        rows = self._page(agent_id, seq, last) if seq <= last else []
        if not rows:  # an agent with events here exists: only none asks the agents table
            self.get_record(agent_id)
        while rows:
            for row in rows:
                yield _event(agent_id, row)
            seq = rows[-1][0] + 1
            rows = self._page(agent_id, seq, last) if len(rows) == _PAGE and seq <= last else []

    def _page(self, agent_id: str, seq: int, last: int) -> list[Any]:
        with self._lock:
            return self._db.execute(
                "SELECT seq, kind, at, data, prev_hash, hash, epoch FROM events "
                "WHERE agent_id = ? AND seq >= ? AND seq <= ? ORDER BY seq LIMIT ?",
                (agent_id, seq, last, _PAGE),
            ).fetchall()

    # -- leases ---------------------------------------------------------------

    def acquire_lease(
        self, agent_id: str, owner: str, ttl: float, now: float, *, takeover: str | None = None
    ) -> Lease:
        with self._tx() as db:
            if db.execute(SQLITE.agent_exists, (agent_id,)).fetchone() is None:
                raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
            other = owner if takeover is None else takeover
            row = db.execute(
                SQLITE.lease_take, (agent_id, owner, now + ttl, now, owner, other)
            ).fetchone()
            if row is None:
                held = self._lease_row(agent_id)
                assert held is not None  # the upsert found it and left it
                raise LeaseHeld(lease_held_message(held, now))
            return Lease(agent_id, owner, int(row[0]), now + ttl)

    def renew_lease(self, lease: Lease, ttl: float, now: float) -> Lease:
        with self._tx() as db:
            cur = db.execute(
                SQLITE.lease_renew, (now + ttl, lease.agent_id, lease.epoch, lease.owner)
            )
            if cur.rowcount != 1:
                raise renewal_refused(lease)
        return Lease(lease.agent_id, lease.owner, lease.epoch, now + ttl)

    def release_lease(self, lease: Lease) -> None:
        with self._tx() as db:
            db.execute(SQLITE.lease_release, (lease.agent_id, lease.epoch))

    def get_lease(self, agent_id: str) -> Lease | None:
        with self._lock:
            return self._lease_row(agent_id)

    def _lease_row(self, agent_id: str) -> Lease | None:
        row = self._db.execute(SQLITE.lease_get, (agent_id,)).fetchone()
        return None if row is None else Lease(agent_id, row[0], int(row[1]), float(row[2]))

    # -- secrets (sealed values only) -------------------------------------------

    def put_secret(self, tenant: str, agent_id: str, name: str, sealed: str, at: float) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO secrets (tenant, agent_id, name, sealed, updated_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, agent_id, name) DO UPDATE SET "
                "sealed = excluded.sealed, updated_at = excluded.updated_at",
                (tenant, agent_id, name, sealed, at),
            )

    def get_secret(self, tenant: str, agent_id: str, name: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT sealed FROM secrets WHERE tenant = ? AND agent_id = ? AND name = ?",
                (tenant, agent_id, name),
            ).fetchone()
        return None if row is None else str(row[0])

    def list_secrets(self, tenant: str) -> list[tuple[str, str, float]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT agent_id, name, updated_at FROM secrets WHERE tenant = ? "
                "ORDER BY agent_id, name",
                (tenant,),
            ).fetchall()
        return [(str(a), str(n), float(t)) for a, n, t in rows]

    def delete_secret(self, tenant: str, agent_id: str, name: str) -> bool:
        with self._tx() as db:
            cur = db.execute(
                "DELETE FROM secrets WHERE tenant = ? AND agent_id = ? AND name = ?",
                (tenant, agent_id, name),
            )
            return cur.rowcount == 1

    # -- policies ---------------------------------------------------------------

    def put_policy(self, tenant: str, text: str, by: str, at: float) -> int:
        with self._tx() as db:
            row = db.execute(
                "SELECT COALESCE(MAX(version), 0) FROM policies WHERE tenant = ?", (tenant,)
            ).fetchone()
            version = int(row[0]) + 1
            db.execute(
                "INSERT INTO policies (tenant, version, text, set_by, set_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (tenant, version, text, by, at),
            )
            return version

    def policy_version(self, tenant: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT MAX(version) FROM policies WHERE tenant = ?", (tenant,)
            ).fetchone()
        return int(row[0] or 0)

    def get_policy(self, tenant: str, version: int | None = None) -> PolicyRecord | None:
        with self._lock:
            if version is None:
                row = self._db.execute(
                    "SELECT version, text, set_by, set_at FROM policies WHERE tenant = ? "
                    "ORDER BY version DESC LIMIT 1",
                    (tenant,),
                ).fetchone()
            else:
                row = self._db.execute(
                    "SELECT version, text, set_by, set_at FROM policies "
                    "WHERE tenant = ? AND version = ?",
                    (tenant, version),
                ).fetchone()
        if row is None:
            return None
        return PolicyRecord(tenant, int(row[0]), str(row[1]), str(row[2]), float(row[3]))

    def post_signal(self, agent_id: str, signal_id: str, data: dict[str, Any], at: float) -> None:
        self.get_record(agent_id)
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO signals (agent_id, signal_id, data, at) "
                "VALUES (?, ?, ?, ?)",
                (agent_id, signal_id, dumps(data), at),
            )

    def signals(self, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT signal_id, data FROM signals WHERE agent_id = ? ORDER BY at, signal_id",
                (agent_id,),
            ).fetchall()
        return _signal_rows(rows)

    def drop_signals(self, agent_id: str, signal_ids: Sequence[str]) -> None:
        with self._tx() as db:
            db.executemany(
                "DELETE FROM signals WHERE agent_id = ? AND signal_id = ?",
                [(agent_id, sid) for sid in signal_ids],
            )

    def read_events_of_kinds(self, agent_id: str, kinds: Iterable[str]) -> list[Event]:
        self.get_record(agent_id)  # NotFound, like read_events
        wanted = set(kinds)
        if wanted <= set(INDEXED_KINDS):
            # exactly the partial index's condition, so SQLite can use it; the few
            # ledger rows it returns are then filtered here
            sql = f"INDEXED BY events_kind WHERE agent_id = ? AND kind IN ({_INDEXED_SQL})"
            params: tuple[str, ...] = (agent_id,)
        else:
            marks = ", ".join("?" * len(wanted))
            sql, params = f"WHERE agent_id = ? AND kind IN ({marks})", (agent_id, *sorted(wanted))
        with self._lock:
            rows = self._db.execute(
                f"SELECT seq, kind, at, data, prev_hash, hash, epoch FROM events {sql} "
                "ORDER BY seq",
                params,
            ).fetchall()
        rows = [r for r in rows if r[1] in wanted]
        return [_event(agent_id, row) for row in rows]


def _event_row(e: Event) -> tuple[object, ...]:
    """An event as its row, in :data:`~stead.store.statements.EVENT_COLUMNS` order, its
    data and hashes as stored at rest (:mod:`stead.store.codec`)."""
    data = e.data_json if e.data_json is not None else dumps(dict(e.data))
    return (
        e.agent_id, e.seq, e.kind, e.at, codec.pack(data),
        codec.pack_hash(e.prev_hash), codec.pack_hash(e.hash), e.epoch,
    )  # fmt: skip


def _snapshots(db: sqlite3.Connection, batch: Batch) -> None:
    """Make or consume the snapshots a batch's events name, in a savepoint: a refusal
    undoes this batch's rows only, and the group goes on."""
    db.execute("SAVEPOINT batch")
    try:
        for ev in batch.events:
            if ev.kind in SNAPSHOT_KINDS:
                sqlite_snapshots.change(db, ev, batch.state.tenant)
        if (spec := upgraded_spec(batch.events)) is not None:
            db.execute(
                "UPDATE agents SET spec = ? WHERE agent_id = ?",
                (codec.pack(dumps(spec)), batch.state.agent_id),
            )
    except BaseException:
        db.execute("ROLLBACK TO batch")
        raise
    finally:
        db.execute("RELEASE batch")


def _event(agent_id: str, row: Sequence[Any]) -> Event:
    """An event from its stored row; corrupt JSON is an integrity error, not a crash."""
    s, kind, at, stored, prev_hash, h, epoch = row
    data = codec.unpack(stored, f"agent {agent_id}: event {s}", s, agent_id=agent_id)
    try:
        parsed = loads(data)
    except ValueError as exc:
        raise IntegrityError(
            f"agent {agent_id}: event {s} is corrupt, its stored data is not "
            f"valid JSON ({exc}); run `stead audit verify {agent_id}`",
            seq=s,
        ) from exc
    prev, this = codec.unpack_hash(prev_hash), codec.unpack_hash(h)
    return Event(agent_id, s, kind, at, parsed, prev, this, epoch, data)


def _signal_rows(rows: Sequence[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(str(sid), loads(data)) for sid, data in rows]
