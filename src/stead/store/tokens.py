"""API tokens and the operator's log: the rows behind ``stead serve``'s credentials.

A token names one tenant and one role; the server takes the tenant of every
request from it, so nothing of another tenant can be asked for. Only a digest
of a token's secret is stored (:mod:`stead.server.auth` makes and checks
them), so a copy of the database lets no one call the server. The operator's
log keeps what the operator must see and no tenant may: failed
authentications above all, with where they came from.

These rows are the operator's, not a tenant's: they are not part of the
:class:`~stead.store.base.Store` interface that a tenant's view
(:class:`~stead.store.scoped.TenantStore`) narrows, and each backend mixes in
its own :class:`TokenRows` (SQL here for SQLite and PostgreSQL, a dict for the
memory store). Their tables are made by migration 8 on SQLite
(:data:`SQLITE_CREATE`) and 3 on PostgreSQL (:data:`POSTGRES_CREATE`).
"""

from __future__ import annotations

import abc
import threading
from dataclasses import dataclass, replace
from typing import Any

from ..canonical import dumps, loads
from ..errors import UsageError
from .sql_connections import SqlConnections

ROLES = ("viewer", "operator", "approver", "admin")
"""From least to most: each role may do what the roles before it may (see
:mod:`stead.server.auth` for what each adds)."""

SQLITE_CREATE = """
    CREATE TABLE IF NOT EXISTS api_tokens (
        token_id   TEXT PRIMARY KEY,
        tenant     TEXT NOT NULL,
        role       TEXT NOT NULL,
        name       TEXT NOT NULL,
        digest     TEXT NOT NULL,
        created_at REAL NOT NULL,
        revoked_at REAL
    );
    CREATE INDEX IF NOT EXISTS api_tokens_tenant ON api_tokens (tenant, token_id);
    CREATE TABLE IF NOT EXISTS operator_log (
        seq  INTEGER PRIMARY KEY AUTOINCREMENT,
        at   REAL NOT NULL,
        kind TEXT NOT NULL,
        data TEXT NOT NULL
    );
"""
POSTGRES_CREATE = """
    CREATE TABLE api_tokens (
        token_id   TEXT COLLATE "C" PRIMARY KEY,
        tenant     TEXT COLLATE "C" NOT NULL,
        role       TEXT COLLATE "C" NOT NULL,
        name       TEXT NOT NULL,
        digest     TEXT COLLATE "C" NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        revoked_at DOUBLE PRECISION
    );
    CREATE INDEX api_tokens_tenant ON api_tokens (tenant, token_id);
    CREATE TABLE operator_log (
        seq  BIGSERIAL PRIMARY KEY,
        at   DOUBLE PRECISION NOT NULL,
        kind TEXT COLLATE "C" NOT NULL,
        data TEXT NOT NULL
    );
"""
_COLUMNS = "token_id, tenant, role, name, digest, created_at, revoked_at"


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A token as stored: never its secret, only the secret's digest."""

    token_id: str
    tenant: str
    role: str
    name: str
    digest: str
    created_at: float
    revoked_at: float | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise UsageError(f"a token's role is one of {', '.join(ROLES)}, not {self.role!r}")


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line of the operator's log."""

    seq: int
    at: float
    kind: str
    data: dict[str, Any]


def _record(row: Any) -> TokenRecord:
    t, tenant, role, name, digest, created, revoked = row
    return TokenRecord(t, tenant, role, name, digest, float(created),
                       None if revoked is None else float(revoked))  # fmt: skip


class TokenRows(abc.ABC):
    """The tokens and the operator's log of one store (every tenant's)."""

    @abc.abstractmethod
    def put_token(self, record: TokenRecord) -> None:
        """Store a new token (its id is new: ids are never reused)."""

    @abc.abstractmethod
    def get_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id, revoked or not; None if there is none."""

    @abc.abstractmethod
    def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        """Every token (of ``tenant``), in the order they were made."""

    @abc.abstractmethod
    def revoke_token(self, token_id: str, at: float) -> bool:
        """Revoke a live token; False if there is none, or it was revoked already."""

    @abc.abstractmethod
    def log_operator(self, kind: str, data: dict[str, Any], at: float) -> None:
        """Append a line to the operator's log."""

    @abc.abstractmethod
    def operator_log(self, after: int = 0, limit: int = 100) -> list[LogEntry]:
        """Lines of the operator's log after ``after``, oldest first."""


class MemoryTokenRows(TokenRows):
    """:class:`TokenRows` in dicts, for the memory store."""

    def __init__(self) -> None:
        self._token_lock = threading.Lock()
        self._tokens: dict[str, TokenRecord] = {}
        self._log: list[LogEntry] = []

    def put_token(self, record: TokenRecord) -> None:
        with self._token_lock:
            if record.token_id in self._tokens:
                raise UsageError(f"there is a token {record.token_id} already")
            self._tokens[record.token_id] = record

    def get_token(self, token_id: str) -> TokenRecord | None:
        with self._token_lock:
            return self._tokens.get(token_id)

    def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        with self._token_lock:
            found = [r for r in self._tokens.values() if tenant in (None, r.tenant)]
        return sorted(found, key=lambda r: r.token_id)

    def revoke_token(self, token_id: str, at: float) -> bool:
        with self._token_lock:
            found = self._tokens.get(token_id)
            if found is None or found.revoked_at is not None:
                return False
            self._tokens[token_id] = replace(found, revoked_at=at)
            return True

    def log_operator(self, kind: str, data: dict[str, Any], at: float) -> None:
        with self._token_lock:
            self._log.append(LogEntry(len(self._log) + 1, at, kind, loads(dumps(data))))

    def operator_log(self, after: int = 0, limit: int = 100) -> list[LogEntry]:
        with self._token_lock:
            return [e for e in self._log if e.seq > after][:limit]


class SqlTokenRows(TokenRows, SqlConnections):
    """:class:`TokenRows` for the SQL backends, which give a connection for a read
    (``_token_read``) and one inside a transaction (``_tx``), and name their
    parameters with ``_param`` (``?`` or ``%s``)."""

    def put_token(self, record: TokenRecord) -> None:
        with self._tx() as db:
            db.execute(
                self._q(f"INSERT INTO api_tokens ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"),
                (record.token_id, record.tenant, record.role, record.name, record.digest,
                 record.created_at, record.revoked_at),
            )  # fmt: skip

    def get_token(self, token_id: str) -> TokenRecord | None:
        with self._token_read() as db:
            row = db.execute(
                self._q(f"SELECT {_COLUMNS} FROM api_tokens WHERE token_id = ?"), (token_id,)
            ).fetchone()
        return None if row is None else _record(row)

    def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        with self._token_read() as db:
            if tenant is None:
                rows = db.execute(f"SELECT {_COLUMNS} FROM api_tokens ORDER BY token_id")
            else:
                rows = db.execute(
                    self._q(
                        f"SELECT {_COLUMNS} FROM api_tokens WHERE tenant = ? ORDER BY token_id"
                    ),
                    (tenant,),
                )
            return [_record(r) for r in rows.fetchall()]

    def revoke_token(self, token_id: str, at: float) -> bool:
        with self._tx() as db:
            cur = db.execute(
                self._q(
                    "UPDATE api_tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL"
                ),
                (at, token_id),
            )
            return bool(cur.rowcount == 1)

    def log_operator(self, kind: str, data: dict[str, Any], at: float) -> None:
        with self._tx() as db:
            db.execute(
                self._q("INSERT INTO operator_log (at, kind, data) VALUES (?, ?, ?)"),
                (at, kind, dumps(data)),
            )

    def operator_log(self, after: int = 0, limit: int = 100) -> list[LogEntry]:
        with self._token_read() as db:
            rows = db.execute(
                self._q(
                    "SELECT seq, at, kind, data FROM operator_log "
                    "WHERE seq > ? ORDER BY seq LIMIT ?"
                ),
                (after, limit),
            ).fetchall()
        return [LogEntry(int(s), float(a), str(k), loads(d)) for s, a, k, d in rows]
