"""The SQLite backend's anchors: one row per agent, replaced with each append.

Kept apart from :mod:`stead.store.sqlite` like the snapshot rows: the table is
made by migration 7 (:data:`CREATE`) and widened by migration 9 (:func:`seal`),
a row is written in the transaction of the events it describes (:func:`put`),
and :class:`AnchorRows` reads it.
"""

from __future__ import annotations

import sqlite3
import threading

from ..errors import NotFound
from .anchors import Anchor
from .statements import SQLITE, anchor_row

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


def seal(db: sqlite3.Connection) -> None:
    """Migration 9: the spec and the lease epoch each commit was checked and written under.

    Each column is added only where it is missing: the migration may meet a table
    that has it already (a schema whose recorded versions were cut back)."""
    have = {row[1] for row in db.execute("PRAGMA table_info(anchors)")}
    for column, kind in (
        ("spec_hash", "TEXT NOT NULL DEFAULT ''"),
        ("epoch", "INTEGER NOT NULL DEFAULT 0"),
    ):
        if column not in have:
            db.execute(f"ALTER TABLE anchors ADD COLUMN {column} {kind}")


def put(db: sqlite3.Connection, anchor: Anchor) -> None:
    """Replace the agent's anchor, in the transaction that stores its events."""
    db.execute(SQLITE.anchors_put, anchor_row(anchor))


class AnchorRows:
    """:meth:`stead.store.base.Store.get_anchor` for :class:`~stead.store.sqlite.SqliteStore`."""

    _lock: threading.RLock
    _db: sqlite3.Connection

    def get_anchor(self, agent_id: str) -> Anchor | None:
        with self._lock:
            row = self._db.execute(
                "SELECT n.version, n.head_hash, n.state_hash, n.verified, n.public_key, "
                "n.signature, n.spec_hash, n.epoch FROM agents a "
                "LEFT JOIN anchors n ON n.agent_id = a.agent_id WHERE a.agent_id = ?",
                (agent_id,),
            ).fetchone()
        if row is None:
            raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them")
        if row[0] is None:
            return None
        return Anchor(
            agent_id, int(row[0]), row[1], row[2], int(row[3]), row[4], row[5], row[6], int(row[7])
        )
