"""Schedules and their firings: the rows that wake agents at the times people chose.

A schedule (:class:`ScheduleRecord`) is a tenant's: it names an agent to wake,
or a spec to make a fresh agent from for each run, and when
(:mod:`stead.schedules.timing`). Its row holds the next due time
(``next_due``) and the moment it fires (``fire_at``: the due time plus its
jitter).

A worker *claims* schedules that are due, or that have firings not yet
delivered: a claim names its holder and lapses at ``claim_until``, so two
workers never handle one schedule at once (PostgreSQL: ``FOR UPDATE SKIP
LOCKED``; SQLite: its one writer), and a worker killed mid-way loses nothing.
It then *records* the due times it fires (:meth:`ScheduleRows.record_firings`)
as a compare-and-set: the schedule moves on from ``next_due`` only if its
claim still holds and ``next_due`` is still what the worker read, and each
firing is a row keyed by (schedule, due time), so a due time is fired at most
once however many workers race. A firing is recorded ``pending`` and
*settled* once its effect is in the agent's journal, which the journal makes
idempotent (:mod:`stead.schedules.delivery`): a worker killed between the two
leaves a pending firing the next claim delivers, or finds delivered.

Like webhooks, these rows are not part of the tenant-narrowed
:class:`~stead.store.base.Store` interface; each backend mixes in its
:class:`ScheduleRows`. Their tables are made by SQLite's migration 13
(:data:`SQLITE_CREATE`) and PostgreSQL's 9 (:data:`POSTGRES_CREATE`).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..canonical import dumps, loads
from .sql_connections import SqlConnections

SQLITE_CREATE = """
    CREATE TABLE IF NOT EXISTS schedules (
        schedule_id TEXT PRIMARY KEY,
        tenant      TEXT NOT NULL,
        agent_id    TEXT,
        body        TEXT NOT NULL,
        next_due    REAL,
        fire_at     REAL,
        paused      INTEGER NOT NULL DEFAULT 0,
        pending     INTEGER NOT NULL DEFAULT 0,
        runs        INTEGER NOT NULL DEFAULT 0,
        last_run    TEXT,
        claim       TEXT,
        claim_until REAL
    );
    CREATE INDEX IF NOT EXISTS schedules_fire ON schedules (fire_at);
    CREATE INDEX IF NOT EXISTS schedules_tenant ON schedules (tenant, schedule_id);
    CREATE TABLE IF NOT EXISTS schedule_firings (
        schedule_id TEXT NOT NULL,
        due         REAL NOT NULL,
        tenant      TEXT NOT NULL,
        state       TEXT NOT NULL,
        count       INTEGER NOT NULL,
        agent_id    TEXT,
        detail      TEXT NOT NULL,
        made_at     REAL NOT NULL,
        done_at     REAL,
        PRIMARY KEY (schedule_id, due)
    );
    CREATE INDEX IF NOT EXISTS schedule_firings_state ON schedule_firings (schedule_id, state, due);
"""
POSTGRES_CREATE = SQLITE_CREATE.replace("TEXT", 'TEXT COLLATE "C"').replace(
    "REAL", "DOUBLE PRECISION"
)
FIRING_STATES = ("pending", "delivered", "skipped", "missed", "failed")
"""A firing waits to reach its agent (pending), reached it (delivered), was passed
over by the overlap policy (skipped), stands for due times no worker fired in time
that the catch-up policy left out (missed, with their ``count``), or could not be
delivered (failed: the agent is gone or finished, or the schedule is not the one
its agent's journal holds)."""
_SCHEDULE = (
    "schedule_id, tenant, agent_id, body, next_due, fire_at, paused, pending, runs, last_run"
)
_FIRING = "schedule_id, due, tenant, state, count, agent_id, detail, made_at, done_at"


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """A schedule as stored. ``body`` is what it was made with (its definition, the
    spec of a fresh agent per run, who made it and when, its digest and seal);
    the rest moves as it fires."""

    schedule_id: str
    tenant: str
    agent_id: str | None
    body: dict[str, Any]
    next_due: float | None
    fire_at: float | None
    paused: bool = False
    pending: int = 0
    runs: int = 0
    last_run: str | None = None


@dataclass(frozen=True, slots=True)
class FiringRow:
    """One due time of a schedule and what became of it."""

    schedule_id: str
    due: float
    tenant: str
    state: str
    count: int = 1
    agent_id: str | None = None
    detail: str = ""
    made_at: float = 0.0
    done_at: float | None = None


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _schedule(row: Sequence[Any]) -> ScheduleRecord:
    sid, tenant, agent, body, due, fire, paused, pending, runs, last = row
    # SQLite's RETURNING gives a whole REAL back as an int: read every time as a float
    return ScheduleRecord(
        str(sid), str(tenant), agent, loads(body), _float(due), _float(fire), bool(paused),
        int(pending), int(runs), last,
    )  # fmt: skip


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _firing(row: Sequence[Any]) -> FiringRow:
    sid, due, tenant, state, count, agent, detail, made, done = row
    return FiringRow(str(sid), float(due), str(tenant), str(state), int(count), agent,
                     str(detail), float(made), done)  # fmt: skip


class ScheduleRows(abc.ABC):
    """Every tenant's schedules and their firings (see the module's docstring)."""

    @abc.abstractmethod
    def put_schedule(self, record: ScheduleRecord) -> None:
        """Store a new schedule (ValueError if its id is taken)."""

    @abc.abstractmethod
    def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule with this id (of whichever tenant: callers check), or None."""

    @abc.abstractmethod
    def list_schedules(
        self, tenant: str | None = None, agent_id: str | None = None
    ) -> list[ScheduleRecord]:
        """Every schedule (of ``tenant``, of ``agent_id``), oldest first."""

    @abc.abstractmethod
    def set_schedule_time(
        self, schedule_id: str, paused: bool, next_due: float | None, fire_at: float | None
    ) -> bool:
        """Pause or resume a schedule, with the due time it goes on from; False if gone."""

    @abc.abstractmethod
    def delete_schedule(self, schedule_id: str) -> bool:
        """Remove a schedule and its firings; False if there was none."""

    @abc.abstractmethod
    def claim_schedules(
        self, claim: str, now: float, hold: float, limit: int, tenant: str | None = None
    ) -> list[ScheduleRecord]:
        """Claim up to ``limit`` schedules that fire at ``now`` (not paused) or have
        pending firings, that no live claim holds, for ``hold`` seconds; earliest first."""

    @abc.abstractmethod
    def record_firings(
        self,
        claim: str,
        schedule_id: str,
        from_due: float | None,
        next_due: float | None,
        fire_at: float | None,
        firings: Sequence[FiringRow],
    ) -> bool:
        """Move the schedule from ``from_due`` on to ``next_due`` and store ``firings``,
        in one transaction, if ``claim`` holds it and its due time is still
        ``from_due``; False (nothing changed) otherwise."""

    @abc.abstractmethod
    def pending_firings(self, schedule_id: str) -> list[FiringRow]:
        """The schedule's pending firings, earliest due first."""

    @abc.abstractmethod
    def settle_firing(
        self, claim: str, firing: FiringRow, state: str, detail: str, at: float
    ) -> bool:
        """Leave a pending firing ``state`` (counting a delivered one as the schedule's
        latest run), if ``claim`` still holds its schedule; False otherwise."""

    @abc.abstractmethod
    def release_schedules(self, claim: str, schedule_ids: Sequence[str]) -> None:
        """Give back the claims ``claim`` holds on these schedules."""

    @abc.abstractmethod
    def firings(self, schedule_id: str, limit: int = 20) -> list[FiringRow]:
        """The schedule's firings, latest due first."""

    @abc.abstractmethod
    def next_schedule_fire(self, tenant: str | None = None) -> float | None:
        """When the earliest schedule that is not paused fires (None: none does)."""


class MemoryScheduleRows(ScheduleRows):
    """:class:`ScheduleRows` in dicts, for the memory store."""

    def __init__(self) -> None:
        self._schedule_lock = threading.RLock()
        self._schedules: dict[str, ScheduleRecord] = {}
        self._schedule_claims: dict[str, tuple[str, float]] = {}
        self._firings: dict[tuple[str, float], FiringRow] = {}

    def put_schedule(self, record: ScheduleRecord) -> None:
        with self._schedule_lock:
            if record.schedule_id in self._schedules:
                raise ValueError(f"there is a schedule {record.schedule_id} already")
            self._schedules[record.schedule_id] = record

    def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        with self._schedule_lock:
            return self._schedules.get(schedule_id)

    def list_schedules(
        self, tenant: str | None = None, agent_id: str | None = None
    ) -> list[ScheduleRecord]:
        with self._schedule_lock:
            return [
                s for _, s in sorted(self._schedules.items())
                if tenant in (None, s.tenant) and agent_id in (None, s.agent_id)
            ]  # fmt: skip

    def set_schedule_time(
        self, schedule_id: str, paused: bool, next_due: float | None, fire_at: float | None
    ) -> bool:
        with self._schedule_lock:
            found = self._schedules.get(schedule_id)
            if found is None:
                return False
            self._schedules[schedule_id] = replace(
                found, paused=paused, next_due=next_due, fire_at=fire_at
            )
            return True

    def delete_schedule(self, schedule_id: str) -> bool:
        with self._schedule_lock:
            self._firings = {k: f for k, f in self._firings.items() if k[0] != schedule_id}
            self._schedule_claims.pop(schedule_id, None)
            return self._schedules.pop(schedule_id, None) is not None

    def _held(self, schedule_id: str, claim: str) -> bool:
        return self._schedule_claims.get(schedule_id, ("", 0.0))[0] == claim

    def claim_schedules(
        self, claim: str, now: float, hold: float, limit: int, tenant: str | None = None
    ) -> list[ScheduleRecord]:
        with self._schedule_lock:
            due = [
                s for s in self._schedules.values()
                if tenant in (None, s.tenant)
                and (s.pending > 0 or (not s.paused and s.fire_at is not None and s.fire_at <= now))
                and self._schedule_claims.get(s.schedule_id, ("", 0.0))[1] <= now
            ]  # fmt: skip
            due.sort(key=lambda s: (s.fire_at if s.fire_at is not None else 0.0, s.schedule_id))
            for s in due[:limit]:
                self._schedule_claims[s.schedule_id] = (claim, now + hold)
            return due[:limit]

    def record_firings(
        self,
        claim: str,
        schedule_id: str,
        from_due: float | None,
        next_due: float | None,
        fire_at: float | None,
        firings: Sequence[FiringRow],
    ) -> bool:
        with self._schedule_lock:
            found = self._schedules.get(schedule_id)
            if found is None or found.next_due != from_due or not self._held(schedule_id, claim):
                return False
            if any((schedule_id, f.due) in self._firings for f in firings):
                return False
            for f in firings:
                self._firings[(schedule_id, f.due)] = f
            waiting = sum(1 for f in firings if f.state == "pending")
            self._schedules[schedule_id] = replace(
                found, next_due=next_due, fire_at=fire_at, pending=found.pending + waiting
            )
            return True

    def pending_firings(self, schedule_id: str) -> list[FiringRow]:
        with self._schedule_lock:
            return sorted(
                (f for (sid, _), f in self._firings.items()
                 if sid == schedule_id and f.state == "pending"),
                key=lambda f: f.due,
            )  # fmt: skip

    def settle_firing(
        self, claim: str, firing: FiringRow, state: str, detail: str, at: float
    ) -> bool:
        with self._schedule_lock:
            key = (firing.schedule_id, firing.due)
            found, row = self._schedules.get(firing.schedule_id), self._firings.get(key)
            if found is None or row is None or row.state != "pending":
                return False
            if not self._held(firing.schedule_id, claim):
                return False
            self._firings[key] = replace(row, state=state, detail=detail, done_at=at,
                                         agent_id=firing.agent_id)  # fmt: skip
            delivered = state == "delivered"
            self._schedules[firing.schedule_id] = replace(
                found,
                pending=found.pending - 1,
                runs=found.runs + delivered,
                last_run=firing.agent_id if delivered else found.last_run,
            )
            return True

    def release_schedules(self, claim: str, schedule_ids: Sequence[str]) -> None:
        with self._schedule_lock:
            for sid in schedule_ids:
                if self._held(sid, claim):
                    del self._schedule_claims[sid]

    def firings(self, schedule_id: str, limit: int = 20) -> list[FiringRow]:
        with self._schedule_lock:
            rows = [f for (sid, _), f in self._firings.items() if sid == schedule_id]
        return sorted(rows, key=lambda f: f.due, reverse=True)[:limit]

    def next_schedule_fire(self, tenant: str | None = None) -> float | None:
        with self._schedule_lock:
            times = [
                s.fire_at for s in self._schedules.values()
                if tenant in (None, s.tenant) and not s.paused and s.fire_at is not None
            ]  # fmt: skip
        return min(times, default=None)


class SqlScheduleRows(ScheduleRows, SqlConnections):
    """:class:`ScheduleRows` for the SQL backends (their connections:
    :class:`~stead.store.sql_connections.SqlConnections`)."""

    _skip_locked = ""

    def put_schedule(self, record: ScheduleRecord) -> None:
        with self._tx() as db:
            if db.execute(
                self._q("SELECT 1 FROM schedules WHERE schedule_id = ?"), (record.schedule_id,)
            ).fetchone():
                raise ValueError(f"there is a schedule {record.schedule_id} already")
            db.execute(
                self._q(f"INSERT INTO schedules ({_SCHEDULE}) VALUES ({_marks(10)})"),
                (record.schedule_id, record.tenant, record.agent_id, dumps(record.body),
                 record.next_due, record.fire_at, int(record.paused), record.pending,
                 record.runs, record.last_run),
            )  # fmt: skip

    def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        with self._token_read() as db:
            row = db.execute(
                self._q(f"SELECT {_SCHEDULE} FROM schedules WHERE schedule_id = ?"),
                (schedule_id,),
            ).fetchone()
        return None if row is None else _schedule(row)

    def list_schedules(
        self, tenant: str | None = None, agent_id: str | None = None
    ) -> list[ScheduleRecord]:
        where, params = ["1 = 1"], []
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        if agent_id is not None:
            where.append("agent_id = ?")
            params.append(agent_id)
        sql = f"SELECT {_SCHEDULE} FROM schedules WHERE {' AND '.join(where)} ORDER BY schedule_id"
        with self._token_read() as db:
            return [_schedule(r) for r in db.execute(self._q(sql), tuple(params)).fetchall()]

    def set_schedule_time(
        self, schedule_id: str, paused: bool, next_due: float | None, fire_at: float | None
    ) -> bool:
        with self._tx() as db:
            done = db.execute(
                self._q(
                    "UPDATE schedules SET paused = ?, next_due = ?, fire_at = ? "
                    "WHERE schedule_id = ?"
                ),
                (int(paused), next_due, fire_at, schedule_id),
            )
            return bool(done.rowcount == 1)

    def delete_schedule(self, schedule_id: str) -> bool:
        with self._tx() as db:
            db.execute(
                self._q("DELETE FROM schedule_firings WHERE schedule_id = ?"), (schedule_id,)
            )
            gone = db.execute(
                self._q("DELETE FROM schedules WHERE schedule_id = ?"), (schedule_id,)
            )
            return bool(gone.rowcount == 1)

    def claim_schedules(
        self, claim: str, now: float, hold: float, limit: int, tenant: str | None = None
    ) -> list[ScheduleRecord]:
        due = (
            "(pending > 0 OR (paused = 0 AND fire_at <= ?)) "
            "AND (claim_until IS NULL OR claim_until <= ?)"
        )
        params: tuple[Any, ...] = (now, now)
        if tenant is not None:
            due += " AND tenant = ?"
            params += (tenant,)
        with self._token_read() as db:
            # every pass asks: with nothing due, no write transaction is begun
            if (
                db.execute(
                    self._q(f"SELECT 1 FROM schedules WHERE {due} LIMIT 1"), params
                ).fetchone()
                is None
            ):
                return []
        with self._tx() as db:
            rows = db.execute(
                self._q(
                    "UPDATE schedules SET claim = ?, claim_until = ? WHERE schedule_id IN ("
                    f"SELECT schedule_id FROM schedules WHERE {due} "
                    f"ORDER BY fire_at, schedule_id LIMIT ?{self._skip_locked}) "
                    f"RETURNING {_SCHEDULE}"
                ),
                (claim, now + hold, *params, limit),
            ).fetchall()
        found = [_schedule(r) for r in rows]
        return sorted(
            found, key=lambda s: (s.fire_at if s.fire_at is not None else 0.0, s.schedule_id)
        )

    def record_firings(
        self,
        claim: str,
        schedule_id: str,
        from_due: float | None,
        next_due: float | None,
        fire_at: float | None,
        firings: Sequence[FiringRow],
    ) -> bool:
        try:
            return self._record(claim, schedule_id, from_due, next_due, fire_at, firings)
        except _Undo:
            return False

    def _record(
        self,
        claim: str,
        schedule_id: str,
        from_due: float | None,
        next_due: float | None,
        fire_at: float | None,
        firings: Sequence[FiringRow],
    ) -> bool:
        waiting = sum(1 for f in firings if f.state == "pending")
        same_due = "next_due IS NULL" if from_due is None else "next_due = ?"
        with self._tx() as db:
            moved = db.execute(
                self._q(
                    "UPDATE schedules SET next_due = ?, fire_at = ?, pending = pending + ? "
                    f"WHERE schedule_id = ? AND claim = ? AND {same_due}"
                ),
                (next_due, fire_at, waiting, schedule_id, claim,
                 *(() if from_due is None else (from_due,))),
            )  # fmt: skip
            if moved.rowcount != 1:
                return False
            # a due time already recorded (a row set back by hand) undoes it all: once only
            put = self._q(
                f"INSERT INTO schedule_firings ({_FIRING}) VALUES ({_marks(9)}) "
                "ON CONFLICT (schedule_id, due) DO NOTHING"
            )
            for f in firings:
                row = (f.schedule_id, f.due, f.tenant, f.state, f.count, f.agent_id, f.detail,
                       f.made_at, f.done_at)  # fmt: skip
                if db.execute(put, row).rowcount != 1:
                    raise _Undo
            return True

    def pending_firings(self, schedule_id: str) -> list[FiringRow]:
        with self._token_read() as db:
            rows = db.execute(
                self._q(
                    f"SELECT {_FIRING} FROM schedule_firings WHERE schedule_id = ? "
                    "AND state = 'pending' ORDER BY due"
                ),
                (schedule_id,),
            ).fetchall()
        return [_firing(r) for r in rows]

    def settle_firing(
        self, claim: str, firing: FiringRow, state: str, detail: str, at: float
    ) -> bool:
        try:
            return self._settle(claim, firing, state, detail, at)
        except _Undo:
            return False

    def _settle(self, claim: str, firing: FiringRow, state: str, detail: str, at: float) -> bool:
        delivered = state == "delivered"
        with self._tx() as db:
            held = db.execute(
                self._q(
                    "UPDATE schedules SET pending = pending - 1, runs = runs + ?, "
                    "last_run = CASE WHEN ? = 1 THEN ? ELSE last_run END "
                    "WHERE schedule_id = ? AND claim = ? AND pending > 0"
                ),
                (int(delivered), int(delivered), firing.agent_id, firing.schedule_id, claim),
            )
            if held.rowcount != 1:
                return False
            done = db.execute(
                self._q(
                    "UPDATE schedule_firings SET state = ?, detail = ?, done_at = ?, agent_id = ? "
                    "WHERE schedule_id = ? AND due = ? AND state = 'pending'"
                ),
                (state, detail, at, firing.agent_id, firing.schedule_id, firing.due),
            )
            if done.rowcount != 1:
                raise _Undo  # rolls back the schedule's count with it
            return True

    def release_schedules(self, claim: str, schedule_ids: Sequence[str]) -> None:
        if not schedule_ids:
            return
        with self._tx() as db:
            db.cursor().executemany(
                self._q(
                    "UPDATE schedules SET claim = NULL, claim_until = NULL "
                    "WHERE schedule_id = ? AND claim = ?"
                ),
                [(sid, claim) for sid in schedule_ids],
            )

    def firings(self, schedule_id: str, limit: int = 20) -> list[FiringRow]:
        with self._token_read() as db:
            rows = db.execute(
                self._q(
                    f"SELECT {_FIRING} FROM schedule_firings WHERE schedule_id = ? "
                    "ORDER BY due DESC LIMIT ?"
                ),
                (schedule_id, limit),
            ).fetchall()
        return [_firing(r) for r in rows]

    def next_schedule_fire(self, tenant: str | None = None) -> float | None:
        sql = "SELECT MIN(fire_at) FROM schedules WHERE paused = 0"
        params: tuple[Any, ...] = ()
        if tenant is not None:
            sql += " AND tenant = ?"
            params = (tenant,)
        with self._token_read() as db:
            row = db.execute(self._q(sql), params).fetchone()
        return None if row is None or row[0] is None else float(row[0])


class _Undo(Exception):
    """Raised inside a transaction to roll it back (a firing recorded or settled twice)."""
