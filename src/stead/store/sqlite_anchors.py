"""The SQLite backend's anchors: one row per agent, replaced with each append.

Kept apart from :mod:`stead.store.sqlite` like the snapshot rows: the table is
made by migration 7 (:data:`CREATE`), a row is written in the transaction of
the events it describes (:func:`put`), and :class:`AnchorRows` reads it.
"""

from __future__ import annotations

import sqlite3
import threading

from ..errors import NotFound
from .anchors import Anchor

CREATE = """
    CREATE TABLE IF NOT EXISTS anchors (
        agent_id   TEXT PRIMARY KEY,
        version    INTEGER NOT NULL,
        head_hash  TEXT NOT NULL,
        state_hash TEXT NOT NULL,
        verified   INTEGER NOT NULL,
        public_key TEXT NOT NULL,
        signature  TEXT NOT NULL
    );
"""
"""Migration 7: what each agent's last commit left (see :mod:`stead.store.anchors`)."""

_COLUMNS = "agent_id, version, head_hash, state_hash, verified, public_key, signature"


def put(db: sqlite3.Connection, anchor: Anchor) -> None:
    """Replace the agent's anchor, in the transaction that stores its events."""
    db.execute(
        f"INSERT OR REPLACE INTO anchors ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            anchor.agent_id,
            anchor.version,
            anchor.head_hash,
            anchor.state_hash,
            anchor.verified,
            anchor.public_key,
            anchor.signature,
        ),
    )


class AnchorRows:
    """:meth:`stead.store.base.Store.get_anchor` for :class:`~stead.store.sqlite.SqliteStore`."""

    _lock: threading.RLock
    _db: sqlite3.Connection

    def get_anchor(self, agent_id: str) -> Anchor | None:
        with self._lock:
            row = self._db.execute(
                "SELECT n.version, n.head_hash, n.state_hash, n.verified, n.public_key, "
                "n.signature FROM agents a LEFT JOIN anchors n ON n.agent_id = a.agent_id "
                "WHERE a.agent_id = ?",
                (agent_id,),
            ).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        if row[0] is None:
            return None
        return Anchor(agent_id, int(row[0]), row[1], row[2], int(row[3]), row[4], row[5])
