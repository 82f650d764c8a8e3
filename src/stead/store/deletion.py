"""Deleting an agent's rows: every table that names it, in one transaction.

What is deleted is the agent's own: its record, journal and state, its lease,
the secrets scoped to it alone, the signals waiting for it, its snapshots'
rows, its anchor and its long-term memories. Its tenant's secrets, shared
memories and policy, and every other agent, stay. The content its workspace
and snapshots kept is in the blob store, shared by content with other agents
of its tenant: it is collected afterwards, once nothing refers to it
(:mod:`stead.store.collect`).

A lease held live by anyone refuses the deletion (``LeaseHeld``): an agent
being run, or being written by a person, is cancelled or waited for first.
"""

from __future__ import annotations

from typing import Any

from ..errors import LeaseHeld, NotFound
from .base import Lease, lease_held_message

AGENT_TABLES = ("events", "leases", "signals", "snapshots", "anchors", "secrets", "agents")
"""Every table with rows of one agent's own, the record's last (its key is referred to)."""


def not_found(agent_id: str) -> NotFound:
    return NotFound(f"agent {agent_id} not found; `stead ls` lists them")


def refuse_if_held(lease: Lease | None, now: float) -> None:
    if lease is not None and lease.owner and lease.live(now):
        raise LeaseHeld(
            lease_held_message(lease, now).replace(
                "wait for it to finish", "cancel it first (stead cancel), or wait for it to finish"
            )
        )


class SqlDeletion:
    """:meth:`Store.delete_agent` for the SQL backends; ``MARK`` is the driver's
    placeholder."""

    MARK = "?"

    def delete_agent(self: Any, agent_id: str, now: float) -> None:
        mark = self.MARK
        with self._tx() as db:
            if not _rows(db, f"SELECT 1 FROM agents WHERE agent_id = {mark}", agent_id):
                raise not_found(agent_id)
            query = f"SELECT owner, epoch, expires_at FROM leases WHERE agent_id = {mark}"
            for owner, epoch, expires_at in _rows(db, query, agent_id):
                refuse_if_held(Lease(agent_id, owner, int(epoch), float(expires_at)), now)
            for table in AGENT_TABLES:
                db.execute(f"DELETE FROM {table} WHERE agent_id = {mark}", (agent_id,))
            # its long-term memories (stead.memories); its tenant's shared ones stay
            db.execute(f"DELETE FROM memories WHERE owner = {mark}", (agent_id,))


def _rows(db: Any, query: str, agent_id: str) -> list[tuple[Any, ...]]:
    return list(db.execute(query, (agent_id,)).fetchall())
