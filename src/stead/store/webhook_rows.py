"""Webhooks and their outbox: the rows behind telling people what waits for them.

A tenant's admin names a URL and the events it wants (:class:`WebhookRecord`).
Every write that appends events derives its notices (:mod:`stead.notices`)
and, **in the same transaction**, puts one outbox row per notice and per
webhook of the agent's tenant that wants it (:func:`sql_enqueue`, and the
memory store's own): a notice exists exactly when the event that causes it was
committed, and a write that is rolled back leaves none. Rows are never derived
later from the journal, so a webhook added after an event is not told of it.

A deliverer (:mod:`stead.notify.deliverer`) *claims* due rows: a claim names
its holder and lapses at ``claim_until``, so two deliverers never send one row
at once (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite: its one writer), and a
deliverer killed mid-send loses nothing: once the claim lapses, the next one
takes the row. It then *settles* the row (delivered, retry later, or failed),
which only the claim's holder can do, and records the attempt. The row's id is
the ``webhook-id`` of every attempt, so a receiver can drop duplicates.

These rows are the tenants' but not the agents': like API tokens they are not
part of the tenant-narrowed :class:`~stead.store.base.Store` interface; each
backend mixes in its :class:`WebhookRows`. Their tables are made by SQLite's
migration 10 (:data:`SQLITE_CREATE`) and PostgreSQL's 6 (:data:`POSTGRES_CREATE`).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..canonical import dumps, loads
from ..ids import new_id
from ..notices import Notice
from .sql_connections import SqlConnections

SQLITE_CREATE = """
    CREATE TABLE IF NOT EXISTS webhooks (
        hook_id    TEXT PRIMARY KEY,
        tenant     TEXT NOT NULL,
        url        TEXT NOT NULL,
        events     TEXT NOT NULL,
        secret     TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS webhooks_tenant ON webhooks (tenant, hook_id);
    CREATE TABLE IF NOT EXISTS webhook_outbox (
        msg_id      TEXT PRIMARY KEY,
        hook_id     TEXT NOT NULL,
        tenant      TEXT NOT NULL,
        event       TEXT NOT NULL,
        body        TEXT NOT NULL,
        created_at  REAL NOT NULL,
        next_at     REAL NOT NULL,
        attempts    INTEGER NOT NULL DEFAULT 0,
        state       TEXT NOT NULL,
        claim       TEXT,
        claim_until REAL,
        last_code   INTEGER,
        last_error  TEXT NOT NULL DEFAULT '',
        done_at     REAL
    );
    CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox (state, next_at);
    CREATE INDEX IF NOT EXISTS webhook_outbox_hook ON webhook_outbox (hook_id, msg_id);
    CREATE TABLE IF NOT EXISTS webhook_attempts (
        msg_id  TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        hook_id TEXT NOT NULL,
        at      REAL NOT NULL,
        code    INTEGER,
        error   TEXT NOT NULL,
        seconds REAL NOT NULL,
        PRIMARY KEY (msg_id, attempt)
    );
    CREATE INDEX IF NOT EXISTS webhook_attempts_hook ON webhook_attempts (hook_id, at);
"""
POSTGRES_CREATE = (
    SQLITE_CREATE.replace("TEXT", 'TEXT COLLATE "C"')
    .replace("REAL", "DOUBLE PRECISION")
    .replace('TEXT COLLATE "C" NOT NULL DEFAULT', "TEXT NOT NULL DEFAULT")
)
STATES = ("pending", "delivered", "failed")
_HOOK = "hook_id, tenant, url, events, secret, created_at"
_ROW = (
    "msg_id, hook_id, tenant, event, body, created_at, next_at, attempts, state, "
    "last_code, last_error, done_at"
)
_ATTEMPT = "msg_id, attempt, hook_id, at, code, error, seconds"


@dataclass(frozen=True, slots=True)
class WebhookRecord:
    """A tenant's webhook: where to post, which events, and its signing secret as
    stored (sealed under the vault key where there is one; see
    :mod:`stead.notify.signing`)."""

    hook_id: str
    tenant: str
    url: str
    events: tuple[str, ...]
    secret: str
    created_at: float


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One notice for one webhook, until it is delivered or given up on."""

    msg_id: str
    hook_id: str
    tenant: str
    event: str
    body: str
    created_at: float
    next_at: float
    attempts: int = 0
    state: str = "pending"
    last_code: int | None = None
    last_error: str = ""
    done_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"msg_id": self.msg_id, "hook_id": self.hook_id, "event": self.event,
                "created_at": self.created_at, "next_at": self.next_at,
                "attempts": self.attempts, "state": self.state, "last_code": self.last_code,
                "last_error": self.last_error, "done_at": self.done_at}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at delivering a row: the HTTP status (None: no answer) or what failed."""

    msg_id: str
    attempt: int
    hook_id: str
    at: float
    code: int | None
    error: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"msg_id": self.msg_id, "attempt": self.attempt, "at": self.at,
                "code": self.code, "error": self.error, "seconds": self.seconds}  # fmt: skip


class _At:
    """A clock that reads one instant: outbox ids ordered by their event's time."""

    def __init__(self, at: float) -> None:
        self._at = at

    def now(self) -> float:
        return self._at


def outbox_rows(
    tenant: str, notices: Sequence[Notice], hooks: Sequence[tuple[str, Sequence[str]]]
) -> list[OutboxRow]:
    """The rows ``notices`` make for the tenant's ``hooks`` ((hook id, events) each)."""
    return [
        OutboxRow(new_id("msg", _At(n.at)), hook_id, tenant, n.event, n.body, n.at, n.at)
        for n in notices
        for hook_id, events in hooks
        if n.event in events
    ]


def _hook(row: Any) -> WebhookRecord:
    h, tenant, url, events, secret, created = row
    return WebhookRecord(h, tenant, url, tuple(loads(events)), secret, float(created))


def _row(row: Any) -> OutboxRow:
    m, h, tenant, event, body, created, next_at, attempts, state, code, error, done = row
    return OutboxRow(m, h, tenant, event, body, float(created), float(next_at), int(attempts),
                     state, None if code is None else int(code), error,
                     None if done is None else float(done))  # fmt: skip


def _attempt(row: Any) -> Attempt:
    m, n, h, at, code, error, seconds = row
    return Attempt(m, int(n), h, float(at), None if code is None else int(code), error,
                   float(seconds))  # fmt: skip


class WebhookRows(abc.ABC):
    """Every tenant's webhooks, their outbox and the attempts made."""

    @abc.abstractmethod
    def put_webhook(self, record: WebhookRecord) -> None:
        """Store a new webhook."""

    @abc.abstractmethod
    def get_webhook(self, hook_id: str) -> WebhookRecord | None:
        """The webhook with this id (of whichever tenant: callers check), or None."""

    @abc.abstractmethod
    def list_webhooks(self, tenant: str | None = None) -> list[WebhookRecord]:
        """Every webhook (of ``tenant``), oldest first."""

    @abc.abstractmethod
    def delete_webhook(self, hook_id: str) -> bool:
        """Remove a webhook with its outbox and attempts; False if there was none."""

    @abc.abstractmethod
    def claim_deliveries(self, claim: str, now: float, hold: float, limit: int) -> list[OutboxRow]:
        """Claim up to ``limit`` pending rows due at ``now`` that no live claim holds,
        for ``hold`` seconds, as ``claim``; oldest due first."""

    @abc.abstractmethod
    def settle_delivery(self, claim: str, attempt: Attempt, state: str, next_at: float) -> bool:
        """Record ``attempt`` and leave its row ``state`` (pending: due at ``next_at``),
        if ``claim`` still holds it; False (nothing changed) if it does not."""

    @abc.abstractmethod
    def outbox(self, hook_id: str, limit: int = 20) -> list[OutboxRow]:
        """The webhook's rows, newest first."""

    @abc.abstractmethod
    def prune_deliveries(self, before: float) -> int:
        """Forget rows delivered or failed before ``before``, with their attempts; how many."""

    @abc.abstractmethod
    def attempts(self, hook_id: str, limit: int = 20) -> list[Attempt]:
        """The webhook's attempts, newest first."""


class MemoryWebhookRows(WebhookRows):
    """:class:`WebhookRows` in dicts, for the memory store; its writes call
    :meth:`_enqueue` under the store's lock."""

    def __init__(self) -> None:
        self._hook_lock = threading.RLock()
        self._hooks: dict[str, WebhookRecord] = {}
        self._outbox: dict[str, OutboxRow] = {}
        self._claims: dict[str, tuple[str, float]] = {}
        self._attempts: list[Attempt] = []

    def _enqueue(self, tenant: str, notices: Sequence[Notice]) -> None:
        if not notices:
            return
        with self._hook_lock:
            hooks = [(h.hook_id, h.events) for h in self._hooks.values() if h.tenant == tenant]
            for row in outbox_rows(tenant, notices, sorted(hooks)):
                self._outbox[row.msg_id] = row

    def put_webhook(self, record: WebhookRecord) -> None:
        with self._hook_lock:
            if record.hook_id in self._hooks:
                raise ValueError(f"there is a webhook {record.hook_id} already")
            self._hooks[record.hook_id] = record

    def get_webhook(self, hook_id: str) -> WebhookRecord | None:
        with self._hook_lock:
            return self._hooks.get(hook_id)

    def list_webhooks(self, tenant: str | None = None) -> list[WebhookRecord]:
        with self._hook_lock:
            found = [h for h in self._hooks.values() if tenant in (None, h.tenant)]
        return sorted(found, key=lambda h: h.hook_id)

    def delete_webhook(self, hook_id: str) -> bool:
        with self._hook_lock:
            if self._hooks.pop(hook_id, None) is None:
                return False
            self._outbox = {k: r for k, r in self._outbox.items() if r.hook_id != hook_id}
            self._attempts = [a for a in self._attempts if a.hook_id != hook_id]
            return True

    def claim_deliveries(self, claim: str, now: float, hold: float, limit: int) -> list[OutboxRow]:
        with self._hook_lock:
            due = sorted(
                (r for r in self._outbox.values()
                 if r.state == "pending" and r.next_at <= now
                 and self._claims.get(r.msg_id, ("", 0.0))[1] <= now),
                key=lambda r: (r.next_at, r.msg_id),
            )[:limit]  # fmt: skip
            for r in due:
                self._claims[r.msg_id] = (claim, now + hold)
            return due

    def settle_delivery(self, claim: str, attempt: Attempt, state: str, next_at: float) -> bool:
        with self._hook_lock:
            row = self._outbox.get(attempt.msg_id)
            if (
                row is None
                or row.state != "pending"
                or self._claims.get(row.msg_id, ("", 0.0))[0] != claim
            ):
                return False
            del self._claims[row.msg_id]
            done = attempt.at if state != "pending" else None
            self._outbox[row.msg_id] = replace(
                row, attempts=row.attempts + 1, state=state, next_at=next_at,
                last_code=attempt.code, last_error=attempt.error, done_at=done,
            )  # fmt: skip
            self._attempts.append(replace(attempt, attempt=row.attempts + 1))
            return True

    def outbox(self, hook_id: str, limit: int = 20) -> list[OutboxRow]:
        with self._hook_lock:
            rows = [r for r in self._outbox.values() if r.hook_id == hook_id]
        return sorted(rows, key=lambda r: r.msg_id, reverse=True)[:limit]

    def prune_deliveries(self, before: float) -> int:
        with self._hook_lock:
            gone = {
                k
                for k, r in self._outbox.items()
                if r.state != "pending" and r.done_at is not None and r.done_at < before
            }
            self._outbox = {k: r for k, r in self._outbox.items() if k not in gone}
            self._attempts = [a for a in self._attempts if a.msg_id not in gone]
            return len(gone)

    def attempts(self, hook_id: str, limit: int = 20) -> list[Attempt]:
        with self._hook_lock:
            found = [a for a in self._attempts if a.hook_id == hook_id]
        return sorted(found, key=lambda a: (a.at, a.msg_id, a.attempt), reverse=True)[:limit]


def sql_enqueue(db: Any, param: str, tenant: str, notices: Sequence[Notice]) -> None:
    """Put ``notices``' outbox rows for the tenant's webhooks, in the caller's write
    transaction (``db``: its connection; ``param``: ``?`` or ``%s``)."""
    if not notices:
        return
    found = db.execute(
        f"SELECT hook_id, events FROM webhooks WHERE tenant = {param} ORDER BY hook_id",
        (tenant,),
    ).fetchall()
    rows = outbox_rows(tenant, notices, [(h, tuple(loads(e))) for h, e in found])
    if rows:
        marks = ", ".join([param] * 8)
        for r in rows:  # a few at most: one per interested webhook
            db.execute(
                "INSERT INTO webhook_outbox (msg_id, hook_id, tenant, event, body, created_at, "
                f"next_at, state) VALUES ({marks})",
                (r.msg_id, r.hook_id, r.tenant, r.event, r.body, r.created_at, r.next_at, r.state),
            )


class SqlWebhookRows(WebhookRows, SqlConnections):
    """:class:`WebhookRows` for the SQL backends (see
    :class:`~stead.store.sql_connections.SqlConnections` for what they give)."""

    _skip_locked = ""
    """What the claim's inner select adds: PostgreSQL's ``FOR UPDATE SKIP LOCKED``, so
    deliverers claiming at once pass over each other's rows instead of waiting."""

    def put_webhook(self, record: WebhookRecord) -> None:
        with self._tx() as db:
            db.execute(
                self._q(f"INSERT INTO webhooks ({_HOOK}) VALUES (?, ?, ?, ?, ?, ?)"),
                (record.hook_id, record.tenant, record.url, dumps(list(record.events)),
                 record.secret, record.created_at),
            )  # fmt: skip

    def get_webhook(self, hook_id: str) -> WebhookRecord | None:
        with self._token_read() as db:
            row = db.execute(
                self._q(f"SELECT {_HOOK} FROM webhooks WHERE hook_id = ?"), (hook_id,)
            ).fetchone()
        return None if row is None else _hook(row)

    def list_webhooks(self, tenant: str | None = None) -> list[WebhookRecord]:
        with self._token_read() as db:
            if tenant is None:
                rows = db.execute(f"SELECT {_HOOK} FROM webhooks ORDER BY hook_id").fetchall()
            else:
                rows = db.execute(
                    self._q(f"SELECT {_HOOK} FROM webhooks WHERE tenant = ? ORDER BY hook_id"),
                    (tenant,),
                ).fetchall()
        return [_hook(r) for r in rows]

    def delete_webhook(self, hook_id: str) -> bool:
        with self._tx() as db:
            gone = db.execute(self._q("DELETE FROM webhooks WHERE hook_id = ?"), (hook_id,))
            for table in ("webhook_outbox", "webhook_attempts"):
                db.execute(self._q(f"DELETE FROM {table} WHERE hook_id = ?"), (hook_id,))
            return bool(gone.rowcount == 1)

    def claim_deliveries(self, claim: str, now: float, hold: float, limit: int) -> list[OutboxRow]:
        with self._token_read() as db:
            # a worker asks every pass: with nothing due, no write transaction is begun
            due = db.execute(
                self._q(
                    "SELECT 1 FROM webhook_outbox WHERE state = 'pending' AND next_at <= ? "
                    "AND (claim_until IS NULL OR claim_until <= ?) LIMIT 1"
                ),
                (now, now),
            ).fetchone()
        if due is None:
            return []
        with self._tx() as db:
            rows = db.execute(
                self._q(
                    "UPDATE webhook_outbox SET claim = ?, claim_until = ? WHERE msg_id IN ("
                    "SELECT msg_id FROM webhook_outbox WHERE state = 'pending' AND next_at <= ? "
                    "AND (claim_until IS NULL OR claim_until <= ?) "
                    f"ORDER BY next_at, msg_id LIMIT ?{self._skip_locked}) RETURNING {_ROW}"
                ),
                (claim, now + hold, now, now, limit),
            ).fetchall()
        return sorted((_row(r) for r in rows), key=lambda r: (r.next_at, r.msg_id))

    def settle_delivery(self, claim: str, attempt: Attempt, state: str, next_at: float) -> bool:
        done = attempt.at if state != "pending" else None
        with self._tx() as db:
            row = db.execute(
                self._q(
                    "UPDATE webhook_outbox SET attempts = attempts + 1, state = ?, next_at = ?, "
                    "last_code = ?, last_error = ?, done_at = ?, claim = NULL, "
                    "claim_until = NULL WHERE msg_id = ? AND claim = ? AND state = 'pending' "
                    "RETURNING attempts"
                ),
                (state, next_at, attempt.code, attempt.error, done, attempt.msg_id, claim),
            ).fetchone()
            if row is None:
                return False
            db.execute(
                self._q(f"INSERT INTO webhook_attempts ({_ATTEMPT}) VALUES (?, ?, ?, ?, ?, ?, ?)"),
                (attempt.msg_id, int(row[0]), attempt.hook_id, attempt.at, attempt.code,
                 attempt.error, attempt.seconds),
            )  # fmt: skip
            return True

    def outbox(self, hook_id: str, limit: int = 20) -> list[OutboxRow]:
        with self._token_read() as db:
            rows = db.execute(
                self._q(
                    f"SELECT {_ROW} FROM webhook_outbox WHERE hook_id = ? "
                    "ORDER BY msg_id DESC LIMIT ?"
                ),
                (hook_id, limit),
            ).fetchall()
        return [_row(r) for r in rows]

    def prune_deliveries(self, before: float) -> int:
        done = "state <> 'pending' AND done_at < ?"
        with self._tx() as db:
            db.execute(
                self._q(
                    "DELETE FROM webhook_attempts WHERE msg_id IN "
                    f"(SELECT msg_id FROM webhook_outbox WHERE {done})"
                ),
                (before,),
            )
            gone = db.execute(self._q(f"DELETE FROM webhook_outbox WHERE {done}"), (before,))
            return int(gone.rowcount)

    def attempts(self, hook_id: str, limit: int = 20) -> list[Attempt]:
        with self._token_read() as db:
            rows = db.execute(
                self._q(
                    f"SELECT {_ATTEMPT} FROM webhook_attempts WHERE hook_id = ? "
                    "ORDER BY at DESC, msg_id DESC, attempt DESC LIMIT ?"
                ),
                (hook_id, limit),
            ).fetchall()
        return [_attempt(r) for r in rows]
