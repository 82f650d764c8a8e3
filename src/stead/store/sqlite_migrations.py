"""SQLite schema migrations: an ordered list, position + 1 = version.

Each migration is applied in one transaction together with the row recording
its version. Never edit a migration that has shipped; append a new one.

A migration is SQL, or a function of the open transaction. The state row of
an agent is a fold of its journal (:func:`stead.state.fold`): when a new
stead folds existing events into something else (a new field, a changed
rule), it appends :func:`refold_states`, so that every stored state is again
exactly what its journal folds to (what ``stead audit verify`` checks). The
PostgreSQL backend keeps a list of its own (:mod:`stead.store.postgres_migrations`,
with its own ``refold_states``): a change of the fold appends to both.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ..canonical import dumps, loads
from ..errors import IntegrityError
from ..journal import Event, verify_chain
from ..state import fold
from . import codec, history, memory_rows, schedule_rows, sqlite_anchors, tokens, webhook_rows
from .base import wake_at


def refold_states(db: sqlite3.Connection) -> None:
    """Rebuild every agent's state row by folding its journal, one agent at a time.

    Only a journal that verifies and ends where its row says is folded: any
    other is left as it is, so that ``stead audit verify`` still reports it
    (a refold must never make a damaged or cut journal look whole).
    """
    agents = db.execute("SELECT agent_id, version, state FROM agents ORDER BY agent_id")
    for agent_id, version, stored in agents.fetchall():
        rows = db.execute(
            "SELECT seq, kind, at, data, prev_hash, hash, epoch FROM events "
            "WHERE agent_id = ? ORDER BY seq",
            (agent_id,),
        )
        try:
            texts = [(r, codec.unpack(r[3], f"agent {agent_id}: event {r[0]}", r[0])) for r in rows]
            events = [
                Event(
                    agent_id,
                    seq,
                    kind,
                    at,
                    loads(text),
                    codec.unpack_hash(prev),
                    codec.unpack_hash(h),
                    epoch,
                    text,
                )
                for (seq, kind, at, _, prev, h, epoch), text in texts
            ]
            row = loads(codec.unpack(stored, f"agent {agent_id}'s state row"))
        except (ValueError, IntegrityError):
            continue
        head = row.get("head_hash") if isinstance(row, dict) else None
        chain = verify_chain(events)
        if not chain.ok or not events or events[-1].seq != version or chain.head_hash != head:
            continue
        state = fold(events)
        db.execute(
            "UPDATE agents SET state = ?, status = ?, version = ?, wake_at = ? WHERE agent_id = ?",
            (
                codec.pack_checkpoint(dumps(state.to_json()), state.status),
                state.status,
                state.version,
                wake_at(state),
                agent_id,
            ),
        )


def compressed_rows(db: sqlite3.Connection) -> None:
    """Rows may be stored compressed from this version on (:mod:`stead.store.codec`).

    The schema does not change: a TEXT column of SQLite keeps a BLOB as it is, and
    a row that is text reads as it always did, so no existing row is rewritten (a
    rewrite would hold the write lock for as long as the largest store takes to
    compress, for disk that ``VACUUM`` only gives back later). The version is what
    matters: a stead older than this one would read a compressed row as damaged
    JSON, so it is refused the store before it reads one (``SchemaTooNew``).
    """


Migration = str | Callable[[sqlite3.Connection], None]

MIGRATIONS: list[Migration] = [
    # 1: agents, their journals, and leases
    """
    CREATE TABLE agents (
        agent_id   TEXT PRIMARY KEY,
        tenant     TEXT NOT NULL,
        name       TEXT NOT NULL,
        spec       TEXT NOT NULL,
        created_at REAL NOT NULL,
        version    INTEGER NOT NULL,
        status     TEXT NOT NULL,
        state      TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX agents_tenant ON agents (tenant, agent_id);
    CREATE TABLE events (
        agent_id  TEXT NOT NULL,
        seq       INTEGER NOT NULL,
        kind      TEXT NOT NULL,
        at        REAL NOT NULL,
        data      TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash      TEXT NOT NULL,
        epoch     INTEGER NOT NULL,
        PRIMARY KEY (agent_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE leases (
        agent_id   TEXT PRIMARY KEY,
        owner      TEXT NOT NULL,
        epoch      INTEGER NOT NULL,
        expires_at REAL NOT NULL
    );
    """,
    # 2: the secrets vault (values are AES-GCM ciphertexts, never plain text)
    """
    CREATE TABLE secrets (
        tenant     TEXT NOT NULL,
        agent_id   TEXT NOT NULL,
        name       TEXT NOT NULL,
        sealed     TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (tenant, agent_id, name)
    );
    """,
    # 3: policies (versioned per tenant), and a partial index for reading an agent's
    # ledger events (and its certificate) without its whole journal: only those rows
    # are in it, so appending any other event costs nothing more
    """
    CREATE TABLE policies (
        tenant     TEXT NOT NULL,
        version    INTEGER NOT NULL,
        text       TEXT NOT NULL,
        set_by     TEXT NOT NULL,
        set_at     REAL NOT NULL,
        PRIMARY KEY (tenant, version)
    );
    CREATE INDEX events_kind ON events (agent_id, kind, seq)
        WHERE kind IN ('agent_created', 'autonomy_changed', 'grant_added', 'grant_revoked',
                       'completion_certified');
    """,
    # 4: requests for a running agent, such as a quarantine, that its worker
    # picks up before its next step (the person cannot take the lease meanwhile)
    """
    CREATE TABLE signals (
        agent_id  TEXT NOT NULL,
        signal_id TEXT NOT NULL,
        data      TEXT NOT NULL,
        at        REAL NOT NULL,
        PRIMARY KEY (agent_id, signal_id)
    );
    """,
    # 5: hibernation. Snapshots (made and consumed in the transactions of the
    # events that say so); forks and imports join the ledger's index (their first
    # event is their creation); and what a worker asks of every agent: is there work,
    # or a timer due? answered from one index however many agents are idle
    """
    ALTER TABLE agents ADD COLUMN wake_at REAL;
    CREATE INDEX agents_work ON agents (status, wake_at);
    CREATE TABLE snapshots (
        snapshot_id     TEXT PRIMARY KEY,
        agent_id        TEXT NOT NULL,
        tenant          TEXT NOT NULL,
        version         INTEGER NOT NULL,
        manifest        TEXT NOT NULL,
        manifest_digest TEXT NOT NULL,
        files           INTEGER NOT NULL,
        bytes           INTEGER NOT NULL,
        stored_bytes    INTEGER NOT NULL,
        created_at      REAL NOT NULL,
        consumed_at     REAL,
        consumed_by     TEXT
    );
    CREATE INDEX snapshots_agent ON snapshots (agent_id, version);
    DROP INDEX events_kind;
    CREATE INDEX events_kind ON events (agent_id, kind, seq)
        WHERE kind IN ('agent_created', 'autonomy_changed', 'grant_added', 'grant_revoked',
                       'completion_certified', 'agent_forked', 'agent_imported');
    """,
    # 6: the fold now keeps what monitors must remember past a restart (tainted
    # results, the error streak) and what a suspended agent waited for; a cleared
    # outcome no longer frees an agent that a violation still holds
    refold_states,
    # 7: each agent's anchor: where its last commit left the journal, the hash of
    # the state row it wrote, and the agent's signature over both (when it has a key)
    sqlite_anchors.CREATE,
    # 8: the server's API tokens (digests only) and the operator's log
    tokens.SQLITE_CREATE,
    # 9: each anchor also pins the agent's spec and the lease epoch of its commit, so
    # an edited spec column or a lease set back is refused (stead.integrity.sealing)
    sqlite_anchors.seal,
    # 10: webhooks, their outbox (rows put in the transaction of the events that cause
    # them) and the attempts made to deliver them
    webhook_rows.SQLITE_CREATE,
    # 11: the store's history: for each migration from here on, the stead version that
    # applied it and when (a new store's rows go back to version 1: who made it)
    history.SQLITE_CREATE,
    # 12: rows compressed at rest (stead.store.codec): events' data, agents' state and
    # spec may now be BLOBs naming their codec in their first byte
    compressed_rows,
    # 13: schedules (stead.schedules) and their firings, one row per due time fired
    schedule_rows.SQLITE_CREATE,
    # 14: long-term memories (stead.memories): text, provenance and vector per row
    memory_rows.SQLITE_CREATE,
]


def apply_migrations(db: sqlite3.Connection, current: int) -> None:
    """Apply every migration after version ``current``, each recorded with its version
    in ``schema_migrations`` and with this stead's in ``store_history``
    (:mod:`stead.store.history`), in the caller's transaction."""
    for version in range(current + 1, len(MIGRATIONS) + 1):
        migration = MIGRATIONS[version - 1]
        if callable(migration):
            migration(db)
        else:
            for statement in migration.split(";"):
                if statement.strip():
                    db.execute(statement)
        db.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?, julianday('now'))",
            (version,),
        )
    if current < len(MIGRATIONS):
        history.record(db, "?", range(current + 1, len(MIGRATIONS) + 1))
