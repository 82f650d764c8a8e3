"""Workers on many hosts hear of new work at once: ``NOTIFY`` as it is written, ``LISTEN``.

A write that gives an agent work (it becomes runnable: made, a message, an
approval, a cleared violation; or it sets a timer, whose time a sleeping worker
must learn) sends a notification on the store's channel in the same
transaction, so it is delivered when, and only if, the write commits. A worker
with nothing to do waits on the channel (on a connection of its own, outside
the pool) until a notification comes, the earliest timer falls due
(:func:`next_wake`), or its poll interval passes; so an agent is picked up
within milliseconds of its event, and no worker polls hot.

Only a change into work is told: a running agent's every step does not
notify. A lease given back on an agent that still has work is told too: work
told while someone held the agent (a person's message is written under the
agent's lease) found no worker free to take it. Many workers hear each
notification; the agent's lease decides which one runs it, and the others find
it busy.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg
from psycopg import sql

from ..state import State
from .base import RUN_STATUSES, wake_at

Conn = psycopg.Connection[Any]


def channel(schema: str | None) -> str:
    """The channel of one store: each schema has its own, so stores never wake
    each other's workers."""
    return f"stead_work_{schema}" if schema else "stead_work"


def gives_work(before: tuple[str, Any] | None, state: State) -> bool:
    """Whether a write gives the agent work: ``before`` is its (status, wake_at) as
    stored until now (None: it is new)."""
    status, due = before if before is not None else ("", None)
    due_now = wake_at(state)
    became_runnable = state.status in RUN_STATUSES and status not in RUN_STATUSES
    return became_runnable or (due_now is not None and due_now != due)


def tell(db: Conn, name: str, agent_id: str, before: tuple[str, Any] | None, state: State) -> None:
    """Notify, in the writing transaction, when this write gives the agent work
    (:func:`gives_work`)."""
    if gives_work(before, state):
        db.execute("SELECT pg_notify(%s, %s)", (name, agent_id))


def next_wake(db: Conn, tenant: str | None) -> float | None:
    where, params = ("", ()) if tenant is None else (" AND tenant = %s", (tenant,))
    row = db.execute(
        "SELECT min(wake_at) FROM agents WHERE status IN ('waiting', 'hibernated') "
        "AND wake_at IS NOT NULL" + where,
        params,
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


class Listener:
    """One worker's ear on the store's channel: a connection of its own, listening
    from its first wait on, so nothing told between two waits is missed."""

    def __init__(self, conninfo: str, name: str) -> None:
        self.conninfo = conninfo
        self.name = name
        self._db: Conn | None = None

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notification; True if one came.

        The first call starts listening and returns True at once: work told
        before then was not heard, so the caller must look again now.
        """
        if self._db is None or self._db.closed:
            self._db = psycopg.connect(self.conninfo, autocommit=True)
            self._db.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.name)))
            return True
        heard = False
        for _ in self._db.notifies(timeout=max(0.0, timeout), stop_after=1):
            heard = True
        if heard:  # several told at once are one look for the worker
            for _ in self._db.notifies(timeout=0.0):
                pass
        return heard

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(psycopg.Error):
                self._db.close()
            self._db = None


def claim(
    db: Conn, owner: str, ttl: float, now: float, limit: int, tenant: str | None
) -> list[tuple[str, int]]:
    """In one statement (so one transaction): lock up to ``limit`` agents with work
    whose lease has lapsed (or that have none), skipping rows another worker has
    locked (it is claiming or writing them), and take their leases for ``owner``,
    however many; (agent, epoch) of each."""
    where, params = ("", ()) if tenant is None else (" AND a.tenant = %s", (tenant,))
    rows = db.execute(
        "WITH c AS (SELECT a.agent_id FROM agents a LEFT JOIN leases l "
        "ON l.agent_id = a.agent_id WHERE (a.status IN ('created', 'running') OR "
        "(a.status IN ('waiting', 'hibernated') AND a.wake_at <= %s)) AND "
        "(l.agent_id IS NULL OR l.expires_at <= %s)"
        + where
        + " ORDER BY a.agent_id LIMIT %s FOR UPDATE OF a SKIP LOCKED) "
        "INSERT INTO leases AS l (agent_id, owner, epoch, expires_at) "
        "SELECT agent_id, %s, 1, %s FROM c ORDER BY agent_id "
        "ON CONFLICT (agent_id) DO UPDATE SET owner = EXCLUDED.owner, epoch = l.epoch + 1, "
        "expires_at = EXCLUDED.expires_at WHERE l.expires_at <= %s RETURNING l.agent_id, l.epoch",
        (now, now, *params, limit, owner, now + ttl, now),
    ).fetchall()
    return sorted((str(agent_id), int(epoch)) for agent_id, epoch in rows)
