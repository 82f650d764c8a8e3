"""PostgreSQL schema migrations: an ordered list, position + 1 = version.

The same rules as :mod:`stead.store.sqlite_migrations`, with a list of its
own (the two backends' versions count separately): never edit a migration
that has shipped, append a new one; each is applied in the transaction that
records its version in ``schema_migrations``; a schema whose recorded version
is newer than this list is refused with :class:`~stead.errors.SchemaTooNew`
before anything is written to it.

Migration 1 is the whole of SQLite's schema at its version 7 (agents with
their state row and ``wake_at``, events, leases, secrets, policies, signals,
snapshots, anchors), written for PostgreSQL:

* identifiers, statuses and kinds are ``TEXT COLLATE "C"``, so that every
  ``ORDER BY`` sorts by code point exactly as Python and SQLite do, whatever
  the database's own collation;
* event data, the state row and specs are ``text``, not ``jsonb``: the hash
  chain and the anchor are taken over the exact bytes written, and ``jsonb``
  would reorder keys and respace them;
* times are ``double precision`` (seconds since the epoch, as the clock gives
  them), so a value reads back as the same float it was written as.

Migration 2 adds the ``blobs`` table of :mod:`stead.store.postgres_blobs`
(PostgreSQL only: a SQLite store keeps its blobs in a folder); 3 the API
tokens; 4 the anchors' ``spec_hash`` and ``epoch`` (SQLite's 9); 5 when each
blob was stored; 6 the webhooks and their outbox (SQLite's 10); 7 the store's
history (SQLite's 11, :mod:`stead.store.history`); 8 events' data compressed at
rest (SQLite's 12, :mod:`stead.store.codec`); 9 schedules and their firings
(SQLite's 13, :mod:`stead.store.schedule_rows`). The state row and the spec stay
text here: PostgreSQL compresses a row's long values itself (TOAST), and a
state row is rewritten with every commit.

When a new stead folds existing events into something else, it appends
:func:`refold_states` to this list as well as to SQLite's.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from ..canonical import dumps, loads
from ..errors import IntegrityError, StoreUnusable
from ..journal import Event, verify_chain
from ..state import fold
from . import codec, history, memory_rows, schedule_rows, tokens, webhook_rows
from .base import wake_at

INDEXED_KINDS = (
    "agent_created",
    "autonomy_changed",
    "grant_added",
    "grant_revoked",
    "completion_certified",
    "agent_forked",
    "agent_imported",
)
"""The event kinds in the partial index ``events_kind``: the ledger and certificates."""
INDEXED_SQL = ", ".join(f"'{k}'" for k in INDEXED_KINDS)

# one lock for every migration of this database, whatever its schema: two
# processes opening a fresh schema at once must not both create its tables
_MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('stead: migrations', 0))"

Conn = psycopg.Connection[TupleRow]
Migration = str | Callable[[Conn], None]


def refold_states(db: Conn) -> None:
    """Rebuild every agent's state row by folding its journal, one agent at a time.

    Only a journal that verifies and ends where its row says is folded; any
    other is left as it is for ``stead audit verify`` to report (a refold must
    never make a damaged or cut journal look whole).
    """
    agents = db.execute("SELECT agent_id, version, state FROM agents ORDER BY agent_id").fetchall()
    for agent_id, version, stored in agents:
        rows = db.execute(
            f"SELECT seq, kind, at, data, prev_hash, hash, epoch{_packed(db)} FROM events "
            "WHERE agent_id = %s ORDER BY seq",
            (agent_id,),
        ).fetchall()
        try:
            texts = [(r, codec.unpack(r[7] if r[7] is not None else r[3], "an event", r[0]))
                     for r in rows]  # fmt: skip
            events = [
                Event(agent_id, seq, kind, at, loads(text), prev, h, epoch, text)
                for (seq, kind, at, _, prev, h, epoch, _), text in texts
            ]
            row = loads(stored)
        except (ValueError, IntegrityError):
            continue
        head = row.get("head_hash") if isinstance(row, dict) else None
        chain = verify_chain(events)
        if not chain.ok or not events or events[-1].seq != version or chain.head_hash != head:
            continue
        state = fold(events)
        db.execute(
            "UPDATE agents SET state = %s, status = %s, version = %s, wake_at = %s "
            "WHERE agent_id = %s",
            (dumps(state.to_json()), state.status, state.version, wake_at(state), agent_id),
        )


def _packed(db: Conn) -> str:
    """The events' ``packed`` column, or NULL in its place before migration 8 made it
    (a refold runs at the version it was appended at)."""
    found = db.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = 'events' AND column_name = 'packed'"
    ).fetchone()
    return ", packed" if found else ", NULL"


MIGRATIONS: list[Migration] = [
    # 1: everything SQLite's schema holds at its version 7
    f"""
    CREATE TABLE agents (
        agent_id   TEXT COLLATE "C" PRIMARY KEY,
        tenant     TEXT COLLATE "C" NOT NULL,
        name       TEXT COLLATE "C" NOT NULL,
        spec       TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        version    BIGINT NOT NULL,
        status     TEXT COLLATE "C" NOT NULL,
        state      TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        wake_at    DOUBLE PRECISION
    );
    CREATE INDEX agents_tenant ON agents (tenant, agent_id);
    CREATE INDEX agents_work ON agents (status, wake_at);
    CREATE TABLE events (
        agent_id  TEXT COLLATE "C" NOT NULL,
        seq       BIGINT NOT NULL,
        kind      TEXT COLLATE "C" NOT NULL,
        at        DOUBLE PRECISION NOT NULL,
        data      TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash      TEXT NOT NULL,
        epoch     BIGINT NOT NULL,
        PRIMARY KEY (agent_id, seq)
    );
    CREATE INDEX events_kind ON events (agent_id, kind, seq) WHERE kind IN ({INDEXED_SQL});
    CREATE TABLE leases (
        agent_id   TEXT COLLATE "C" PRIMARY KEY,
        owner      TEXT NOT NULL,
        epoch      BIGINT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE secrets (
        tenant     TEXT COLLATE "C" NOT NULL,
        agent_id   TEXT COLLATE "C" NOT NULL,
        name       TEXT COLLATE "C" NOT NULL,
        sealed     TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, agent_id, name)
    );
    CREATE TABLE policies (
        tenant  TEXT COLLATE "C" NOT NULL,
        version BIGINT NOT NULL,
        text    TEXT NOT NULL,
        set_by  TEXT NOT NULL,
        set_at  DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, version)
    );
    CREATE TABLE signals (
        agent_id  TEXT COLLATE "C" NOT NULL,
        signal_id TEXT COLLATE "C" NOT NULL,
        data      TEXT NOT NULL,
        at        DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (agent_id, signal_id)
    );
    CREATE TABLE snapshots (
        snapshot_id     TEXT COLLATE "C" PRIMARY KEY,
        agent_id        TEXT COLLATE "C" NOT NULL,
        tenant          TEXT COLLATE "C" NOT NULL,
        version         BIGINT NOT NULL,
        manifest        TEXT NOT NULL,
        manifest_digest TEXT NOT NULL,
        files           BIGINT NOT NULL,
        bytes           BIGINT NOT NULL,
        stored_bytes    BIGINT NOT NULL,
        created_at      DOUBLE PRECISION NOT NULL,
        consumed_at     DOUBLE PRECISION,
        consumed_by     TEXT
    );
    CREATE INDEX snapshots_agent ON snapshots (agent_id, version);
    CREATE TABLE anchors (
        agent_id   TEXT COLLATE "C" PRIMARY KEY,
        version    BIGINT NOT NULL,
        head_hash  TEXT NOT NULL,
        state_hash TEXT NOT NULL,
        verified   BIGINT NOT NULL,
        public_key TEXT NOT NULL,
        signature  TEXT NOT NULL
    );
    """,
    # 2: blobs, when --blobs names this schema (stead.store.postgres_blobs): one row per
    # tenant and digest, holding the bytes a blob folder would (zstandard when smaller).
    # Stored out of line and not compressed again: PostgreSQL's own compression would
    # only spend time on bytes that are compressed already.
    """
    CREATE TABLE blobs (
        tenant TEXT COLLATE "C" NOT NULL,
        digest TEXT COLLATE "C" NOT NULL,
        data   BYTEA NOT NULL,
        size   BIGINT NOT NULL,
        PRIMARY KEY (tenant, digest)
    );
    ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL;
    """,
    # 3: the server's API tokens (digests only) and the operator's log
    tokens.POSTGRES_CREATE,
    # 4: each anchor also pins the agent's spec and the lease epoch of its commit, so
    # an edited spec column or a lease set back is refused (stead.integrity.sealing)
    """
    ALTER TABLE anchors ADD COLUMN IF NOT EXISTS spec_hash TEXT NOT NULL DEFAULT '';
    ALTER TABLE anchors ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0;
    """,
    # 5: when each blob was last stored, so that a collection (stead gc) spares blobs
    # written moments ago that the commit naming them has not yet stored; blobs
    # stored before count as stored now
    """
    ALTER TABLE blobs ADD COLUMN stored_at DOUBLE PRECISION NOT NULL
        DEFAULT extract(epoch FROM now());
    """,
    # 6: webhooks, their outbox and the attempts made (SQLite's 10)
    webhook_rows.POSTGRES_CREATE,
    # 7: the store's history (SQLite's 11): for each migration from here on, the stead
    # version that applied it and when (a new store's rows go back to version 1)
    history.POSTGRES_CREATE,
    # 8: events' data compressed at rest (stead.store.codec, SQLite's 12): a compressed
    # row keeps its bytes in `packed` and no text; a row of text reads as it always did.
    # Both statements change only the catalogue: no row is read or rewritten.
    """
    ALTER TABLE events ADD COLUMN packed BYTEA;
    ALTER TABLE events ALTER COLUMN data DROP NOT NULL;
    """,
    # 9: schedules and their firings (SQLite's 13, stead.store.schedule_rows)
    schedule_rows.POSTGRES_CREATE,
    # 10: long-term memories (SQLite's 14, stead.store.memory_rows)
    memory_rows.POSTGRES_CREATE,
]


def recorded_version(db: Conn) -> int | None:
    """The schema version recorded in the current schema (None: no stead tables there)."""
    found = db.execute(
        "SELECT 1 FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name = 'schema_migrations'"
    ).fetchone()
    if found is None:
        return None
    row = db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
    return int(row[0]) if row is not None else 0


def other_table(db: Conn) -> str | None:
    """A table in the current schema that is not stead's, if the schema has any."""
    row = db.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() ORDER BY table_name LIMIT 1"
    ).fetchone()
    return None if row is None else str(row[0])


def read_history(db: Conn) -> list[history.HistoryEntry]:
    """The schema's history (:mod:`stead.store.history`), read without writing; empty
    for a store made before it was kept."""
    found = db.execute(
        "SELECT 1 FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name = 'store_history'"
    ).fetchone()
    return history.read(db) if found else []


def check_version(db: Conn, current: int, where: str) -> None:
    """Refuse a schema that a newer stead wrote (before anything is written to it),
    naming the stead that wrote it when its history says."""
    if current > len(MIGRATIONS):
        schema = f"the PostgreSQL schema {where}"
        raise history.too_new(schema, current, len(MIGRATIONS), read_history(db))


def migrate(db: Conn, where: str, schema: str | None) -> None:
    """Make ``schema`` if it is missing and bring it up to this code's version.

    All in one transaction, under a lock that makes two processes opening the
    same fresh schema take turns; a schema that holds another program's
    tables, or that a newer stead wrote, is refused before anything is written.
    """
    with db.transaction():
        db.execute(_MIGRATION_LOCK)
        if schema is not None:
            db.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        current = recorded_version(db)
        if current is None:
            other = other_table(db)
            if other is not None:
                raise StoreUnusable(
                    f"{where} is not a stead store (it has a table {other!r} but no stead "
                    "schema); name a schema of its own with ?schema=NAME"
                )
            db.execute(
                "CREATE TABLE schema_migrations ("
                "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            current = 0
        check_version(db, current, where)
        for version in range(current + 1, len(MIGRATIONS) + 1):
            migration = MIGRATIONS[version - 1]
            if callable(migration):
                migration(db)
            else:
                db.execute(migration)
            db.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
        if current < len(MIGRATIONS):
            history.record(db, "%s", range(current + 1, len(MIGRATIONS) + 1))
