"""Blobs in PostgreSQL: content-addressed rows, one per tenant and digest.

For a deployment whose workers already share a PostgreSQL store, this keeps
workspaces' content where every worker reaches it, with nothing more to run.
The rows live in the ``blobs`` table of the schema the URL names (migration 2
of :mod:`stead.store.postgres_migrations`), normally the journal store's own;
a schema named only for blobs is made and migrated like a store's, so its
version is recorded and a newer one refused in the same way.

A row holds the bytes a blob folder would (:func:`stead.store.blobs.pack`),
sent and read in PostgreSQL's binary format, so a 20 MB blob is not doubled
into hex on the wire. ``put`` is one ``INSERT … ON CONFLICT DO NOTHING`` in
autocommit: idempotent, safe for two workers writing the same content at once,
and durable (``synchronous_commit``) before it returns, so before the manifest
that names it is committed. ``get`` checks the SHA-256 like every backend.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import urllib.parse
from collections.abc import Iterator

import psycopg
from psycopg_pool import ConnectionPool

from ..errors import NotFound, StoreUnusable
from ..ids import check_id
from . import postgres_url
from .blobs import ELSEWHERE, check_digest, is_digest, pack, unpack
from .postgres_migrations import Conn, check_version, migrate, recorded_version

POOL_MAX = 8
"""Connections the blob store's pool may open unless the URL's ``pool_max`` says: blob
reads and writes are short, and this pool comes on top of the journal store's own."""


class PostgresBlobs:
    """Every tenant's blobs in one PostgreSQL schema, through one connection pool."""

    def __init__(self, url: str) -> None:
        self._target = postgres_url.parse(url)  # a malformed URL is refused now
        given = "pool_max" in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        self._pool_max = self._target.pool_max if given else POOL_MAX
        self.where = self._target.where
        self._pool: ConnectionPool[Conn] | None = None
        self._lock = threading.Lock()

    def tenant(self, tenant: str) -> TenantBlobs:
        return TenantBlobs(self, check_id(tenant, "tenant"))

    def tenants(self) -> list[str]:
        with self.conn() as db:
            return [str(r[0]) for r in db.execute("SELECT DISTINCT tenant FROM blobs ORDER BY 1")]

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _opened(self) -> ConnectionPool[Conn]:
        """The pool, made (and the schema migrated) when the first blob is used."""
        with self._lock:
            if self._pool is None:
                with psycopg.connect(self._target.conninfo, autocommit=True) as db:
                    current = recorded_version(db)
                    if current is not None:
                        check_version(db, current, self.where)
                    migrate(db, self.where, self._target.schema)
                self._pool = ConnectionPool(
                    self._target.conninfo,
                    min_size=1,
                    max_size=self._pool_max,
                    kwargs={"autocommit": True},
                    name="stead-blobs",
                    open=True,
                )
            return self._pool

    @contextlib.contextmanager
    def conn(self) -> Iterator[Conn]:
        try:
            with self._opened().connection() as db:
                yield db
        except psycopg.OperationalError as exc:
            reason = postgres_url.reason(exc)
            raise StoreUnusable(
                f"the PostgreSQL blob store {self.where} cannot be used: {reason}; check "
                "that the server runs and can be reached (--blobs), then retry"
            ) from exc


class TenantBlobs:
    """One tenant's blobs: every statement names the tenant beside the digest."""

    def __init__(self, backend: PostgresBlobs, tenant: str) -> None:
        self._backend = backend
        self.tenant = tenant

    def has(self, digest: str) -> bool:
        if not is_digest(digest):
            return False
        with self._backend.conn() as db:
            row = db.execute(
                "SELECT 1 FROM blobs WHERE tenant = %s AND digest = %s", (self.tenant, digest)
            ).fetchone()
        return row is not None

    def stored_size(self, digest: str) -> int:
        """The bytes the row holds (compressed, if it is; PostgreSQL's own overhead aside)."""
        with self._backend.conn() as db:
            row = db.execute(
                "SELECT octet_length(data) FROM blobs WHERE tenant = %s AND digest = %s",
                (self.tenant, check_digest(digest)),
            ).fetchone()
        if row is None:
            raise NotFound(self._missing(digest))
        return int(row[0])

    def put(self, data: bytes, digest: str | None = None) -> str:
        digest = check_digest(digest, for_put=True) if digest else hashlib.sha256(data).hexdigest()
        with self._backend.conn() as db:
            db.execute(
                # stored again: new to whoever writes it now, so a collection spares it
                "INSERT INTO blobs (tenant, digest, data, size) VALUES (%s, %s, %b, %s) "
                "ON CONFLICT (tenant, digest) DO UPDATE SET stored_at = EXCLUDED.stored_at",
                (self.tenant, digest, pack(data), len(data)),
            )
        return digest

    def get(self, digest: str) -> bytes:
        with self._backend.conn() as db:
            row = db.execute(
                "SELECT data FROM blobs WHERE tenant = %s AND digest = %s",
                (self.tenant, check_digest(digest)),
                binary=True,
            ).fetchone()
        if row is None:
            raise NotFound(self._missing(digest))
        return unpack(bytes(row[0]), digest, self._where())

    def stored(self) -> Iterator[tuple[str, float]]:
        with self._backend.conn() as db:
            rows = db.execute(
                "SELECT digest, stored_at FROM blobs WHERE tenant = %s ORDER BY digest",
                (self.tenant,),
            ).fetchall()
        for digest, at in rows:
            yield str(digest), float(at)

    def forget_if_older(self, digest: str, cutoff: float) -> int:
        check_digest(digest)
        with self._backend.conn() as db:  # one statement: a blob stored again is spared
            row = db.execute(
                "DELETE FROM blobs WHERE tenant = %s AND digest = %s AND stored_at < %s "
                "RETURNING octet_length(data)",
                (self.tenant, digest, cutoff),
            ).fetchone()
        return int(row[0]) if row else 0

    def forget(self, digest: str) -> None:
        if is_digest(digest):
            with self._backend.conn() as db:
                db.execute(
                    "DELETE FROM blobs WHERE tenant = %s AND digest = %s", (self.tenant, digest)
                )

    def _where(self) -> str:
        return f"{self._backend.where} (tenant {self.tenant})"

    def _missing(self, digest: str) -> str:
        return f"blob {digest} is not in the blob store {self._where()}; {ELSEWHERE}"
