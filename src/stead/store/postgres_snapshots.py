"""The PostgreSQL backend's snapshot rows and its index of agents with work.

The counterpart of :mod:`stead.store.sqlite_snapshots`: here the rows
hibernation makes and consumes, and the queries a worker uses to find agents
to run. Every function takes the connection it runs on; a change runs inside
the transaction of the write that stores its event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from ..canonical import dumps, loads
from ..errors import NotFound, SnapshotConsumed, StoreError
from ..journal import Event, Kind
from .base import SnapshotRecord, consumed_message, no_snapshot_message, snapshot_made

Conn = psycopg.Connection[TupleRow]

_COLUMNS = (
    "snapshot_id, agent_id, tenant, version, manifest, manifest_digest, files, bytes, "
    "stored_bytes, created_at, consumed_at, consumed_by"
)


def change(db: Conn, ev: Event, tenant: str) -> None:
    """Make or consume the snapshot ``ev`` names, in the transaction that stores ``ev``.

    Consuming is a compare-and-set on ``consumed_at`` (an ``UPDATE … WHERE
    consumed_at IS NULL``): of two transactions restoring one snapshot, the
    second waits for the first's row lock, then finds the row consumed and
    raises, which rolls back its whole write. Another agent's snapshot reads
    as missing.
    """
    if ev.kind == Kind.HIBERNATED:
        r = snapshot_made(ev, tenant)
        try:
            with db.transaction():  # a savepoint: a clash leaves the write usable to refuse
                db.execute(
                    f"INSERT INTO snapshots ({_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, NULL, NULL)",
                    (
                        r.snapshot_id,
                        r.agent_id,
                        r.tenant,
                        r.version,
                        dumps(r.manifest),
                        r.manifest_digest,
                        r.files,
                        r.bytes,
                        r.stored_bytes,
                        r.created_at,
                    ),
                )
        except psycopg.errors.UniqueViolation:
            raise StoreError(
                f"agent {ev.agent_id}: a snapshot with id {r.snapshot_id} already exists; "
                "hibernate again to make a new one"
            ) from None
        return
    sid = ev.data["snapshot_id"]
    done = db.execute(
        "UPDATE snapshots SET consumed_at = %s, consumed_by = %s "
        "WHERE snapshot_id = %s AND agent_id = %s AND consumed_at IS NULL",
        (ev.at, ev.data["by"], sid, ev.agent_id),
    )
    if done.rowcount == 1:
        return
    row = db.execute(
        "SELECT consumed_at, consumed_by FROM snapshots WHERE snapshot_id = %s AND agent_id = %s",
        (sid, ev.agent_id),
    ).fetchone()
    if row is None:
        raise NotFound(no_snapshot_message(sid))
    raise SnapshotConsumed(consumed_message(sid, row[0], row[1]))


def get(db: Conn, snapshot_id: str) -> SnapshotRecord:
    row = db.execute(
        f"SELECT {_COLUMNS} FROM snapshots WHERE snapshot_id = %s", (snapshot_id,)
    ).fetchone()
    if row is None:
        raise NotFound(no_snapshot_message(snapshot_id))
    return _record(row)


def of_agent(db: Conn, agent_id: str) -> list[SnapshotRecord]:
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM snapshots WHERE agent_id = %s ORDER BY version", (agent_id,)
    ).fetchall()
    return [_record(r) for r in rows]


def agents_to_run(db: Conn, now: float, tenant: str | None) -> list[str]:
    """Runnable agents, and waiting or hibernated ones whose timer is due (``agents_work``)."""
    where, params = ("", ()) if tenant is None else (" AND tenant = %s", (tenant,))
    rows = db.execute(
        "SELECT agent_id FROM agents WHERE status IN ('created', 'running')"
        + where
        + " UNION SELECT agent_id FROM agents WHERE status IN ('waiting', 'hibernated') "
        "AND wake_at <= %s" + where + " ORDER BY agent_id",
        (*params, now, *params),
    ).fetchall()
    return [str(r[0]) for r in rows]


def idle_agents(db: Conn, before: float, tenant: str | None) -> list[str]:
    """Agents that wait, last written at or before ``before``: candidates to hibernate."""
    where, params = ("", ()) if tenant is None else (" AND tenant = %s", (tenant,))
    rows = db.execute(
        "SELECT agent_id FROM agents WHERE status IN ('waiting', 'needs_attention') "
        "AND updated_at <= %s" + where + " ORDER BY agent_id",
        (before, *params),
    ).fetchall()
    return [str(r[0]) for r in rows]


def _record(row: Sequence[Any]) -> SnapshotRecord:
    return SnapshotRecord(
        snapshot_id=row[0],
        agent_id=row[1],
        tenant=row[2],
        version=int(row[3]),
        manifest=loads(row[4]),
        manifest_digest=row[5],
        files=int(row[6]),
        bytes=int(row[7]),
        stored_bytes=int(row[8]),
        created_at=float(row[9]),
        consumed_at=row[10],
        consumed_by=row[11],
    )
