"""The PostgreSQL backend's rows beside the journal: anchors, secrets, policies,
signals, and the reads of snapshots and of the index of agents with work.

Kept apart from :mod:`stead.store.postgres` (the pool, transactions, the
journal and leases) so that each module stays one concept. :class:`PostgresRows`
is the part of :class:`~stead.store.postgres.PostgresStore` that needs only a
connection whose every statement is its own transaction (``_conn``) and one
inside a transaction (``_tx``); :func:`put_anchor` runs inside the transaction
of the events it describes.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar, cast

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import PoolTimeout

from ..canonical import dumps, loads
from ..errors import NotFound, StoreUnusable
from . import postgres_snapshots
from .anchors import Anchor
from .base import PolicyRecord, SnapshotRecord, Store
from .statements import POSTGRES, anchor_row

Conn = psycopg.Connection[TupleRow]

F = TypeVar("F", bound=Callable[..., Any])


def retried(method: F) -> F:
    """Try a call once more when the connection it was lent had been ended by the
    server (a restart, a failover, an administrator): the pool then holds only live
    connections again, so a worker's read meets a restart once, not as a failure.

    Only for reads, and writes that do the same when done twice (a lease renewed or
    given back). A commit of events is not retried: if the connection went during
    its COMMIT, whether it was stored is unknown, and the activation that made it
    ends and is redone by the next holder from what the store has. A store that
    cannot be reached at all (the pool's wait ran out) is not asked again."""

    @functools.wraps(method)
    def again(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except StoreUnusable as exc:
            lost = exc.__cause__
            if not isinstance(lost, psycopg.OperationalError) or isinstance(lost, PoolTimeout):
                raise
            return method(self, *args, **kwargs)

    return cast(F, again)


def put_anchor(db: Conn, anchor: Anchor) -> None:
    """Replace the agent's anchor, in the transaction that stores its events."""
    db.execute(POSTGRES.anchors_put, anchor_row(anchor))


class PostgresRows(Store):
    """Everything of the store interface that is one query on a side table."""

    @abc.abstractmethod
    def _conn(self) -> AbstractContextManager[Conn]:
        """A pooled connection in autocommit: each statement is its own transaction."""

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[Conn]:
        """A pooled connection inside one transaction, committed when the block ends."""

    # -- anchors ------------------------------------------------------------------

    @retried
    def get_anchor(self, agent_id: str) -> Anchor | None:
        with self._conn() as db:
            row = db.execute(
                "SELECT n.version, n.head_hash, n.state_hash, n.verified, n.public_key, "
                "n.signature, n.spec_hash, n.epoch FROM agents a "
                "LEFT JOIN anchors n ON n.agent_id = a.agent_id WHERE a.agent_id = %s",
                (agent_id,),
            ).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        if row[0] is None:
            return None
        return Anchor(
            agent_id, int(row[0]), row[1], row[2], int(row[3]), row[4], row[5], row[6], int(row[7])
        )

    # -- hibernation: the rows live in stead.store.postgres_snapshots ---------------

    @retried
    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord:
        with self._conn() as db:
            return postgres_snapshots.get(db, snapshot_id)

    @retried
    def list_snapshots(self, agent_id: str) -> list[SnapshotRecord]:
        self.get_record(agent_id)
        with self._conn() as db:
            return postgres_snapshots.of_agent(db, agent_id)

    @retried
    def agents_to_run(self, now: float, tenant: str | None = None) -> list[str]:
        with self._conn() as db:
            return postgres_snapshots.agents_to_run(db, now, tenant)

    @retried
    def idle_agents(self, before: float, tenant: str | None = None) -> list[str]:
        with self._conn() as db:
            return postgres_snapshots.idle_agents(db, before, tenant)

    # -- secrets (sealed values only) -------------------------------------------

    def put_secret(self, tenant: str, agent_id: str, name: str, sealed: str, at: float) -> None:
        with self._conn() as db:
            db.execute(
                "INSERT INTO secrets (tenant, agent_id, name, sealed, updated_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant, agent_id, name) DO UPDATE "
                "SET sealed = EXCLUDED.sealed, updated_at = EXCLUDED.updated_at",
                (tenant, agent_id, name, sealed, at),
            )

    @retried
    def get_secret(self, tenant: str, agent_id: str, name: str) -> str | None:
        with self._conn() as db:
            row = db.execute(
                "SELECT sealed FROM secrets WHERE tenant = %s AND agent_id = %s AND name = %s",
                (tenant, agent_id, name),
            ).fetchone()
        return None if row is None else str(row[0])

    @retried
    def list_secrets(self, tenant: str) -> list[tuple[str, str, float]]:
        with self._conn() as db:
            rows = db.execute(
                "SELECT agent_id, name, updated_at FROM secrets WHERE tenant = %s "
                "ORDER BY agent_id, name",
                (tenant,),
            ).fetchall()
        return [(str(a), str(n), float(t)) for a, n, t in rows]

    def delete_secret(self, tenant: str, agent_id: str, name: str) -> bool:
        with self._conn() as db:
            cur = db.execute(
                "DELETE FROM secrets WHERE tenant = %s AND agent_id = %s AND name = %s",
                (tenant, agent_id, name),
            )
            return cur.rowcount == 1

    # -- policies ---------------------------------------------------------------

    def put_policy(self, tenant: str, text: str, by: str, at: float) -> int:
        with self._tx() as db:
            # the tenant's writers take turns (the lock ends with the transaction), so
            # that two of them never both read N and both try to add N + 1
            db.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended("
                "'stead: policy ' || current_schema() || ' ' || %s, 0))",
                (tenant,),
            )
            row = db.execute(
                "SELECT COALESCE(MAX(version), 0) FROM policies WHERE tenant = %s", (tenant,)
            ).fetchone()
            version = (int(row[0]) if row is not None else 0) + 1
            db.execute(
                "INSERT INTO policies (tenant, version, text, set_by, set_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                (tenant, version, text, by, at),
            )
            return version

    @retried
    def policy_version(self, tenant: str) -> int:
        with self._conn() as db:
            row = db.execute(
                "SELECT MAX(version) FROM policies WHERE tenant = %s", (tenant,)
            ).fetchone()
        return int(row[0] or 0) if row is not None else 0

    @retried
    def get_policy(self, tenant: str, version: int | None = None) -> PolicyRecord | None:
        with self._conn() as db:
            if version is None:
                row = db.execute(
                    "SELECT version, text, set_by, set_at FROM policies WHERE tenant = %s "
                    "ORDER BY version DESC LIMIT 1",
                    (tenant,),
                ).fetchone()
            else:
                row = db.execute(
                    "SELECT version, text, set_by, set_at FROM policies "
                    "WHERE tenant = %s AND version = %s",
                    (tenant, version),
                ).fetchone()
        if row is None:
            return None
        return PolicyRecord(tenant, int(row[0]), str(row[1]), str(row[2]), float(row[3]))

    # -- signals ------------------------------------------------------------------

    def post_signal(self, agent_id: str, signal_id: str, data: dict[str, Any], at: float) -> None:
        self.get_record(agent_id)
        with self._conn() as db:
            db.execute(
                "INSERT INTO signals (agent_id, signal_id, data, at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (agent_id, signal_id) DO UPDATE SET data = EXCLUDED.data, "
                "at = EXCLUDED.at",
                (agent_id, signal_id, dumps(data), at),
            )

    @retried
    def signals(self, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        with self._conn() as db:
            rows = db.execute(
                "SELECT signal_id, data FROM signals WHERE agent_id = %s ORDER BY at, signal_id",
                (agent_id,),
            ).fetchall()
        return [(str(sid), loads(data)) for sid, data in rows]

    @retried
    def drop_signals(self, agent_id: str, signal_ids: Sequence[str]) -> None:
        if not signal_ids:
            return
        with self._conn() as db:
            db.execute(
                "DELETE FROM signals WHERE agent_id = %s AND signal_id = ANY(%s)",
                (agent_id, list(signal_ids)),
            )
