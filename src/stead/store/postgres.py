"""The PostgreSQL backend: one store shared by workers on many hosts.

**Why psycopg 3 with a connection pool.** The worker is synchronous today: a
pool of threads, one activation each, beside heartbeat threads and the group
committer's thread, all calling the :class:`~stead.store.base.Store`
interface as plain functions. psycopg 3 is at home there: its connections
block the calling thread (and let go of the GIL while they wait on the
server), and ``psycopg_pool.ConnectionPool`` lends each call a connection of
its own, so threads run their queries side by side and no connection is ever
shared by two threads in the middle of a transaction. asyncpg only speaks
asyncio: using it would mean making the worker async first, or running an
event loop in a thread and hopping to it for every query for no gain.

If the worker becomes async (to keep thousands of agents in flight while
their model calls wait, issue 17), the store interface would become async
with it, as one interface, not a sync and an async twin of each class. This
backend would then move to psycopg's ``AsyncConnection`` and
``AsyncConnectionPool``, whose calls mirror the ones here one for one, so
every statement and the whole transaction design below stay as they are.
asyncpg would be a choice again then, to weigh on speed (it decodes rows
faster) against rewriting the SQL for its ``$1`` placeholders and its pool.

**Transactions** run at the server's default, READ COMMITTED, and are made
correct for any number of workers on any number of hosts by row locks:

* a write (``_write``, and ``append_many`` for many agents at once) first
  locks the agents' rows (``SELECT … WHERE agent_id = ANY(…) ORDER BY
  agent_id FOR UPDATE``), so every writer of one agent takes its turn on that
  row; only then does it read the lease epochs, in a statement of its own,
  which under READ COMMITTED sees every transaction that committed before the
  lock was granted (a join in the locking statement would read the epochs of
  its own, earlier snapshot). It refuses a stale epoch
  (:class:`~stead.errors.StaleEpoch`) or a version that moved on
  (:class:`~stead.errors.VersionConflict`) before writing anything
  (:func:`stead.store.statements.plan`); then it inserts the events, replaces
  the state rows and the anchors and tells of new work in one statement, and
  makes or consumes snapshot rows, all in the one transaction.
* ``acquire_lease`` takes the same row lock before its compare-and-set
  upsert of the lease row (``ON CONFLICT … DO UPDATE … WHERE`` the lease is
  free, expired, or held by the owner or the one taken over), so a write and
  an acquisition of one agent are ordered: the new holder sees every write
  that committed before it, and every later write sees the raised epoch.
  Without the lock a fenced-off worker could check its epoch, the takeover
  commit, and its events land after it.
* ``renew_lease`` and ``release_lease`` are single compare-and-set UPDATEs.
* ``append_many`` (group commit) stores every batch in one transaction; a
  refused batch is left out of the writes and the others are stored. The rows
  are locked in id order, so two workers grouping the same agents never
  deadlock.

Durability is the server's: with ``synchronous_commit = on`` (the default) a
commit that returned is in the server's flushed WAL.

**JSON** is stored as ``text``: the events' data exactly as it was hashed
into the chain, the state row exactly as its anchor's hash was taken (see
:mod:`stead.store.postgres_migrations`). Nothing is pickled.

Connections are in autocommit: a read, or a write of one statement, is its
own transaction; a write of several runs in ``_tx``. The pool drops a
connection that broke and opens another, so after a server restart the next
call reconnects; the call that met the broken connection fails with
:class:`~stead.errors.StoreUnusable` naming the server (a deadlock or a
serialization failure, which these locks should never cause, with a plain
:class:`~stead.errors.StoreError`).
"""

from __future__ import annotations

import contextlib
import functools
import json
from base64 import b64encode
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ..canonical import dumps, loads
from ..errors import (
    IntegrityError,
    LeaseHeld,
    NotFound,
    SteadError,
    StoreError,
    StoreUnusable,
)
from ..journal import Event
from ..notices import notices
from ..state import State
from . import codec, postgres_snapshots, postgres_url, postgres_wakeups
from .anchors import Anchor, state_row
from .base import (
    AgentRecord,
    AgentRow,
    AgentSummary,
    Batch,
    Lease,
    lease_held_message,
    renewal_refused,
    upgraded_spec,
    wake_at,
)
from .deletion import SqlDeletion
from .history import HistoryEntry
from .memory_rows import SqlMemoryRows
from .postgres_migrations import (
    INDEXED_KINDS,
    INDEXED_SQL,
    MIGRATIONS,
    Conn,
    check_version,
    migrate,
    read_history,
    recorded_version,
)
from .postgres_rows import PostgresRows, put_anchor, retried
from .schedule_rows import SqlScheduleRows
from .statements import (
    POSTGRES,
    POSTGRES_GROUP_WRITE,
    SNAPSHOT_KINDS,
    Stored,
    group_json,
    plan,
)
from .tokens import SqlTokenRows
from .webhook_rows import SqlWebhookRows, sql_enqueue

_PAGE = 2_000
_LOST = (psycopg.OperationalError, psycopg.errors.IdleInTransactionSessionTimeout)
"""What ends a call because its connection or session is gone."""
_EVENT_COLUMNS = "seq, kind, at, data, prev_hash, hash, epoch, packed"


class PostgresStore(
    SqlDeletion, PostgresRows, SqlTokenRows, SqlWebhookRows, SqlScheduleRows, SqlMemoryRows
):
    """A store in one PostgreSQL schema, shared by every worker that names it."""

    MARK = "%s"
    _skip_locked = " FOR UPDATE SKIP LOCKED"

    schema_version = len(MIGRATIONS)
    _param = "%s"

    def __init__(self, url: str, create: bool = True) -> None:
        """Open the store a ``postgresql://`` URL names (see :mod:`stead.store.postgres_url`).

        With ``create``, a missing schema is made and migrated; without it, a
        schema holding no stead store is refused and nothing is made. A schema
        a newer stead wrote is refused either way, before anything is written.
        """
        target = postgres_url.parse(url)
        self.where = target.where
        try:
            with psycopg.connect(target.conninfo, autocommit=True) as db:
                current = recorded_version(db)
                if current is not None:
                    check_version(db, current, self.where)
                elif not create:
                    raise StoreUnusable(
                        f"there is no store at {self.where}; check --store (or $STEAD_STORE)"
                    )
                migrate(db, self.where, target.schema)
        except psycopg.OperationalError as exc:
            raise self._failed(exc) from None
        self._channel = postgres_wakeups.channel(target.schema)
        self._listener = postgres_wakeups.Listener(target.conninfo, self._channel)
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            target.conninfo,
            min_size=1,
            max_size=target.pool_max,
            kwargs={"autocommit": True},
            name="stead",
            open=True,
        )

    # -- plumbing -------------------------------------------------------------

    def _failed(self, exc: psycopg.Error) -> StoreError:
        reason = postgres_url.reason(exc)
        if isinstance(exc, psycopg.errors.IdleInTransactionSessionTimeout):
            return StoreUnusable(
                f"the PostgreSQL store {self.where} ended a transaction of this worker's "
                "that sat idle past idle_in_transaction_session_timeout (a worker stopped "
                "or cut off mid-write); nothing of it was stored, retry"
            )
        if isinstance(exc, psycopg.errors.TransactionRollback):
            # a deadlock or serialization failure: nothing was stored, the server is fine
            return StoreError(
                f"the PostgreSQL store {self.where} rolled a transaction back ({reason}); "
                "nothing of it was stored, retry"
            )
        return StoreUnusable(
            f"the PostgreSQL store {self.where} cannot be used: {reason}; check that the "
            "server runs and can be reached, then retry"
        )

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Conn]:
        try:
            with self._pool.connection() as db:
                yield db
        except _LOST as exc:
            self._purge(exc)
            raise self._failed(exc) from exc

    def _token_read(self) -> contextlib.AbstractContextManager[Conn]:
        return self._conn()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Conn]:
        try:
            with self._pool.connection() as db, db.transaction():
                yield db
        except _LOST as exc:
            self._purge(exc)
            raise self._failed(exc) from exc

    def _purge(self, exc: psycopg.Error) -> None:
        """After a lost connection, drop every dead one from the pool: a server that
        restarted ended them all, and each would fail one more call."""
        if not isinstance(exc, psycopg.errors.TransactionRollback):
            with contextlib.suppress(Exception):
                self._pool.check()

    def recorded_schema_version(self) -> int:
        """The highest schema version recorded in the store's schema."""
        with self._conn() as db:
            return recorded_version(db) or 0

    def history(self) -> list[HistoryEntry]:
        with self._conn() as db:
            return read_history(db)

    def close(self) -> None:
        self._listener.close()
        self._pool.close()

    # -- workers hearing of work (see stead.store.postgres_wakeups) ----------------

    @retried
    def next_wake(self, tenant: str | None = None) -> float | None:
        with self._conn() as db:
            return postgres_wakeups.next_wake(db, tenant)

    def claim(
        self, owner: str, ttl: float, now: float, limit: int, tenant: str | None = None
    ) -> list[Lease] | None:
        with self._conn() as db:  # one statement: its own transaction
            taken = postgres_wakeups.claim(db, owner, ttl, now, limit, tenant)
        return [Lease(agent_id, owner, epoch, now + ttl) for agent_id, epoch in taken]

    def wait_for_work(self, timeout: float) -> bool:
        try:
            return self._listener.wait(timeout)
        except psycopg.OperationalError as exc:
            self._listener.close()  # the next wait listens afresh
            raise self._failed(exc) from exc

    # -- agents ---------------------------------------------------------------

    def _create(
        self, record: AgentRecord, events: Sequence[Event], state: State, anchor: Anchor, at: float
    ) -> None:
        with self._tx() as db:
            made = db.execute(
                "INSERT INTO agents (agent_id, tenant, name, spec, created_at, version, status, "
                "state, updated_at, wake_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (agent_id) DO NOTHING",
                (
                    record.agent_id,
                    record.tenant,
                    record.name,
                    dumps(record.spec),
                    record.created_at,
                    state.version,
                    state.status,
                    state_row(state, anchor),
                    at,
                    wake_at(state),
                ),
            )
            if made.rowcount != 1:
                raise StoreError(
                    f"an agent with id {record.agent_id} already exists; "
                    "choose another id or omit --id"
                )
            _insert_events(db, events)
            put_anchor(db, anchor)
            postgres_wakeups.tell(db, self._channel, record.agent_id, None, state)

    @retried
    def get_record(self, agent_id: str) -> AgentRecord:
        with self._conn() as db:
            row = db.execute(
                "SELECT tenant, name, spec, created_at FROM agents WHERE agent_id = %s",
                (agent_id,),
            ).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        return AgentRecord(agent_id, row[0], row[1], loads(row[2]), float(row[3]))

    @retried
    def load_state(self, agent_id: str) -> State:
        with self._conn() as db:
            row = db.execute("SELECT state FROM agents WHERE agent_id = %s", (agent_id,)).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        return State.from_json(loads(row[0]))

    @retried
    def get_row(self, agent_id: str) -> AgentRow:
        with self._conn() as db:
            row = db.execute(
                "SELECT tenant, name, status, version, wake_at FROM agents WHERE agent_id = %s",
                (agent_id,),
            ).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        due = None if row[4] is None else float(row[4])
        return AgentRow(agent_id, row[0], row[1], row[2], int(row[3]), due)

    @retried
    def list_agents(self, tenant: str | None = None) -> list[AgentSummary]:
        with self._conn() as db:
            if tenant is None:
                rows = db.execute(
                    "SELECT agent_id, tenant, name, status, version, updated_at FROM agents "
                    "ORDER BY agent_id"
                ).fetchall()
            else:
                rows = db.execute(
                    "SELECT agent_id, tenant, name, status, version, updated_at FROM agents "
                    "WHERE tenant = %s ORDER BY agent_id",
                    (tenant,),
                ).fetchall()
        return [AgentSummary(a, t, n, s, int(v), float(u)) for a, t, n, s, v, u in rows]

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
        """Every batch in one transaction, so many agents' steps share one commit.

        A batch that is refused (stale epoch, lost update, bad chain, a snapshot
        already restored) is left out and reported; the others are stored. Rows
        are locked in agent-id order (see the module).
        """
        with self._tx() as db:
            return self._group(db, batches, at)

    def _group(self, db: Conn, batches: Sequence[Batch], at: float) -> list[SteadError | None]:
        """The batches' agents locked and read, each batch checked in Python, and the
        kept ones written by one statement (:data:`~stead.store.statements.
        POSTGRES_GROUP_WRITE`), whatever their number."""
        ids = sorted({b.events[0].agent_id for b in batches if b.events})
        rows = {
            str(r[0]): Stored(int(r[1]), str(r[2]), r[3], 0)
            for r in db.execute(POSTGRES.rows_locked, (ids,), prepare=True)
        }
        # the epochs after the lock, in a statement of their own: its snapshot then
        # includes any acquisition that committed while the lock was awaited
        for agent_id, epoch in db.execute(POSTGRES.epochs, (ids,), prepare=True):
            if agent_id in rows:
                rows[agent_id].epoch = int(epoch)
        kept, results = plan(batches, rows, functools.partial(_snapshots, db))
        if kept:
            told = [
                k.batch.state.agent_id
                for k in kept
                if postgres_wakeups.gives_work((k.before.status, k.before.wake_at), k.batch.state)
            ]
            _group_write(db, group_json(kept, at, told, _event_row), self._channel)
            for k in kept:
                s = k.batch.state
                sql_enqueue(db, "%s", s.tenant, notices(k.batch.events, k.before.status, s))
        return results

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
            seq = int(rows[-1][0]) + 1
            rows = self._page(agent_id, seq, last) if len(rows) == _PAGE and seq <= last else []

    @retried
    def _page(self, agent_id: str, seq: int, last: int) -> list[tuple[Any, ...]]:
        with self._conn() as db:
            return db.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events "
                "WHERE agent_id = %s AND seq >= %s AND seq <= %s ORDER BY seq LIMIT %s",
                (agent_id, seq, last, _PAGE),
            ).fetchall()

    @retried
    def read_events_of_kinds(self, agent_id: str, kinds: Iterable[str]) -> list[Event]:
        wanted = set(kinds)
        with self._conn() as db:
            if wanted <= set(INDEXED_KINDS):
                # exactly the partial index's condition, so the planner uses it; the
                # few ledger rows it returns are then filtered here
                rows = db.execute(
                    f"SELECT {_EVENT_COLUMNS} FROM events "
                    f"WHERE agent_id = %s AND kind IN ({INDEXED_SQL}) ORDER BY seq",
                    (agent_id,),
                ).fetchall()
            else:
                rows = db.execute(
                    f"SELECT {_EVENT_COLUMNS} FROM events "
                    "WHERE agent_id = %s AND kind = ANY(%s) ORDER BY seq",
                    (agent_id, sorted(wanted)),
                ).fetchall()
        if not rows:
            self.get_record(agent_id)  # NotFound, like read_events
        return [_event(agent_id, row) for row in rows if row[1] in wanted]

    # -- leases ---------------------------------------------------------------

    def acquire_lease(
        self, agent_id: str, owner: str, ttl: float, now: float, *, takeover: str | None = None
    ) -> Lease:
        with self._tx() as db:
            # the agent's row lock orders this acquisition with its writes (see the module)
            if db.execute(POSTGRES.agent_exists, (agent_id,)).fetchone() is None:
                raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
            other = owner if takeover is None else takeover
            row = db.execute(
                POSTGRES.lease_take, (agent_id, owner, now + ttl, now, owner, other)
            ).fetchone()
            if row is None:
                held = _lease_row(db, agent_id)
                assert held is not None  # the upsert found it and left it
                raise LeaseHeld(lease_held_message(held, now))
            return Lease(agent_id, owner, int(row[0]), now + ttl)

    @retried
    def renew_lease(self, lease: Lease, ttl: float, now: float) -> Lease:
        with self._conn() as db:
            cur = db.execute(
                POSTGRES.lease_renew, (now + ttl, lease.agent_id, lease.epoch, lease.owner)
            )
            if cur.rowcount != 1:
                raise renewal_refused(lease)
        return Lease(lease.agent_id, lease.owner, lease.epoch, now + ttl)

    @retried
    def renew_leases(self, leases: Sequence[Lease], ttl: float, now: float) -> list[Lease | None]:
        if not leases:
            return []
        with self._conn() as db:
            rows = db.execute(
                "UPDATE leases l SET expires_at = %s FROM unnest(%s::text[], %s::bigint[], "
                "%s::text[]) AS h(agent_id, epoch, owner) WHERE l.agent_id = h.agent_id "
                "AND l.epoch = h.epoch AND l.owner = h.owner RETURNING l.agent_id, l.epoch",
                (
                    now + ttl,
                    [x.agent_id for x in leases],
                    [x.epoch for x in leases],
                    [x.owner for x in leases],
                ),
            ).fetchall()
        held = {(str(r[0]), int(r[1])) for r in rows}
        return [
            Lease(x.agent_id, x.owner, x.epoch, now + ttl)
            if (x.agent_id, x.epoch) in held
            else None
            for x in leases
        ]

    @retried
    def release_lease(self, lease: Lease) -> None:
        # work told while this lease held the agent (a person's message, given under
        # it) found no one free to take it: tell again, now it is free; one statement
        with self._conn() as db:
            db.execute(
                f"WITH r AS ({POSTGRES.lease_release} RETURNING agent_id) "
                "SELECT pg_notify(%s, a.agent_id) FROM agents a JOIN r "
                "ON r.agent_id = a.agent_id WHERE a.status IN ('created', 'running')",
                (lease.agent_id, lease.epoch, self._channel),
            )

    @retried
    def get_lease(self, agent_id: str) -> Lease | None:
        with self._conn() as db:
            return _lease_row(db, agent_id)


def _lease_row(db: Conn, agent_id: str) -> Lease | None:
    row = db.execute(POSTGRES.lease_get, (agent_id,)).fetchone()
    return None if row is None else Lease(agent_id, row[0], int(row[1]), float(row[2]))


def _event_row(e: Event) -> list[object]:
    """An event as its row, in :data:`~stead.store.statements.PG_EVENT_COLUMNS` order:
    its data as text, or compressed (:mod:`stead.store.codec`) in base64 for ``packed``."""
    stored = codec.pack(e.data_json if e.data_json is not None else dumps(dict(e.data)))
    text, packed = (stored, None) if isinstance(stored, str) else (None, b64encode(stored).decode())
    return [e.agent_id, e.seq, e.kind, e.at, text, e.prev_hash, e.hash, e.epoch, packed]


def _insert_events(db: Conn, events: Sequence[Event]) -> None:
    # One statement, not executemany: psycopg pipelines executemany without a sync,
    # and a server waiting inside a pipeline arms no idle_in_transaction_session_
    # timeout, so a worker cut off there would keep the agent's row locked for good.
    # The rows go as one JSON text (encoded in C) rather than eight arrays, whose
    # elements psycopg would adapt one by one in Python on every commit.
    rows = [_event_row(e) for e in events]
    db.execute(
        "INSERT INTO events (agent_id, seq, kind, at, data, prev_hash, hash, epoch, packed) "
        "SELECT r->>0, (r->>1)::bigint, r->>2, (r->>3)::double precision, r->>4, r->>5, "
        "r->>6, (r->>7)::bigint, decode(r->>8, 'base64') "
        "FROM json_array_elements(%s::json) AS r",
        (json.dumps(rows, ensure_ascii=False, allow_nan=False),),
    )


def _group_write(db: Conn, rows: str, channel: str) -> None:
    """A group commit's every write, in one statement (see :func:`_insert_events` on
    why not ``executemany``)."""
    db.execute(POSTGRES_GROUP_WRITE, (rows, channel), prepare=True)


def _snapshots(db: Conn, batch: Batch) -> None:
    """Make or consume the snapshots a batch's events name, in a savepoint: a refusal
    undoes this batch's rows only, and the group goes on."""
    with db.transaction():
        for ev in batch.events:
            if ev.kind in SNAPSHOT_KINDS:
                postgres_snapshots.change(db, ev, batch.state.tenant)
        if (spec := upgraded_spec(batch.events)) is not None:
            db.execute("UPDATE agents SET spec = %s WHERE agent_id = %s",
                       (dumps(spec), batch.state.agent_id))  # fmt: skip


def _event(agent_id: str, row: Sequence[Any]) -> Event:
    """An event from its stored row; corrupt JSON is an integrity error, not a crash."""
    s, kind, at, text, prev_hash, h, epoch, packed = row
    data = codec.unpack(
        text if packed is None else packed, f"agent {agent_id}: event {s}", s, agent_id=agent_id
    )
    try:
        parsed = loads(data)
    except ValueError as exc:
        raise IntegrityError(
            f"agent {agent_id}: event {s} is corrupt, its stored data is not "
            f"valid JSON ({exc}); run `stead audit verify {agent_id}`",
            seq=int(s),
        ) from exc
    return Event(agent_id, int(s), kind, float(at), parsed, prev_hash, h, int(epoch), data)
