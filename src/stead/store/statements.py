"""The SQL stores' one statement layer: leases, commits and claims, written once.

SQLite and PostgreSQL store the same tables and make the same checks; what
differs is the placeholder (``?`` or ``%s``), how a set of rows travels (SQLite
binds each row of one prepared statement, ``executemany``, in C; PostgreSQL
takes every row of a group commit as one JSON parameter, so one statement and
one round trip write them all), and the row lock (PostgreSQL's ``FOR UPDATE``;
SQLite's ``BEGIN IMMEDIATE`` already holds the whole database). Each statement
is written here once, with ``?`` as its placeholder, and rendered for each
backend (:data:`SQLITE`, :data:`POSTGRES`), so a change to a lease or a commit
lands in both stores at once.

A write of many agents (group commit) is planned here too (:func:`plan`): the
rows are locked and read first, every batch is checked in Python against what
they hold (its chain, its epoch, its version, a snapshot it makes or
consumes), a refused batch is left out and reported, and only then are the
kept batches written with one statement per table. A later batch of an agent
already in the group is checked against the earlier one's outcome, as if the
two had been written one after the other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import NotFound, SteadError, StoreError
from ..journal import Event, Kind
from .anchors import Anchor, state_row
from .base import Batch, check_batch, check_write, wake_at

_PG_TYPES = {"int": "bigint", "real": "double precision", "text": "text"}

EVENT_COLUMNS = (
    ("agent_id", "text"), ("seq", "int"), ("kind", "text"), ("at", "real"), ("data", "text"),
    ("prev_hash", "text"), ("hash", "text"), ("epoch", "int"),
)  # fmt: skip
"""The events table's columns, in the order of each store's ``_event_row``."""
PG_EVENT_COLUMNS = (*EVENT_COLUMNS, ("packed", "base64"))
"""PostgreSQL's: a compressed row's bytes go in ``packed``, its ``data`` then null
(:mod:`stead.store.codec`)."""
AGENT_COLUMNS = (
    ("agent_id", "text"), ("version", "int"), ("status", "text"), ("state", "text"),
    ("updated_at", "real"), ("wake_at", "real"),
)  # fmt: skip
"""What a commit changes in the agent's row, in the order of :func:`agent_row`."""
ANCHOR_COLUMNS = (
    ("agent_id", "text"), ("version", "int"), ("head_hash", "text"), ("state_hash", "text"),
    ("verified", "int"), ("public_key", "text"), ("signature", "text"), ("spec_hash", "text"),
    ("epoch", "int"),
)  # fmt: skip
"""The anchors table's columns, in the order of :func:`anchor_row`."""
SNAPSHOT_KINDS = (Kind.HIBERNATED, Kind.RESTORED)
TOUCHING_KINDS = (*SNAPSHOT_KINDS, Kind.SPEC_UPGRADED)
"""Kinds whose batch changes a row beside the journal (a snapshot's, the spec column)."""


def _names(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(name for name, _ in columns)


def _marks(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join("?" for _ in columns)


def _updates(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{name} = excluded.{name}" for name, _ in columns[1:])


def _from_json(columns: Sequence[tuple[str, str]], source: str) -> list[str]:
    """The columns of each row of a JSON array of arrays, cast to their types (bytes
    travel in base64)."""
    return [
        f"{source}->>{i}"
        if kind == "text"
        else f"decode({source}->>{i}, 'base64')"
        if kind == "base64"
        else f"({source}->>{i})::{_PG_TYPES[kind]}"
        for i, (_, kind) in enumerate(columns)
    ]


_LEASE_TAKE = (
    "INSERT INTO leases AS l (agent_id, owner, epoch, expires_at) VALUES (?, ?, 1, ?) "
    "ON CONFLICT (agent_id) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1, "
    "expires_at = excluded.expires_at WHERE l.expires_at <= ? OR l.owner = ? OR l.owner = ? "
    "RETURNING epoch"
)
_ANCHOR_PUT = (
    f"INSERT INTO anchors ({_names(ANCHOR_COLUMNS)}) VALUES ({_marks(ANCHOR_COLUMNS)}) "
    f"ON CONFLICT (agent_id) DO UPDATE SET {_updates(ANCHOR_COLUMNS)}"
)


@dataclass(frozen=True)
class Statements:
    """Every lease and commit statement of one backend, rendered for its placeholder."""

    mark: str
    agent_exists: str
    """Whether the agent is there (on PostgreSQL: its row locked, ordering this
    with the agent's writes; see :mod:`stead.store.postgres`)."""
    lease_take: str
    """The compare-and-set upsert of an acquisition: a row for the owner at epoch
    one above the last, only where the lease is free, lapsed, the owner's own or
    the one taken over; it returns the new epoch, or no row (held)."""
    lease_get: str
    lease_renew: str
    lease_release: str
    rows_locked: str
    """The rows of a set of agents (version, status, timer), locked in id order."""
    epochs: str
    """The lease epochs of a set of agents, read after their rows are locked."""
    events_put: str
    agents_put: str
    anchors_put: str

    def q(self, text: str) -> str:
        """A statement written with ``?`` in this backend's placeholder."""
        return text if self.mark == "?" else text.replace("?", self.mark)


def _render(mark: str, lock: str, any_of: str) -> Statements:
    def q(text: str) -> str:
        return text if mark == "?" else text.replace("?", mark)

    return Statements(
        mark=mark,
        agent_exists=q(f"SELECT 1 FROM agents WHERE agent_id = ?{lock}"),
        lease_take=q(_LEASE_TAKE),
        lease_get=q("SELECT owner, epoch, expires_at FROM leases WHERE agent_id = ?"),
        lease_renew=q(
            "UPDATE leases SET expires_at = ? WHERE agent_id = ? AND epoch = ? AND owner = ?"
        ),
        lease_release=q(
            "UPDATE leases SET owner = '', expires_at = 0 WHERE agent_id = ? AND epoch = ?"
        ),
        rows_locked=q(
            f"SELECT agent_id, version, status, wake_at FROM agents WHERE agent_id {any_of} "
            f"ORDER BY agent_id{lock}"
        ),
        epochs=q(f"SELECT agent_id, epoch FROM leases WHERE agent_id {any_of}"),
        events_put=q(
            f"INSERT INTO events ({_names(EVENT_COLUMNS)}) VALUES ({_marks(EVENT_COLUMNS)})"
        ),
        agents_put=q(
            "UPDATE agents SET "
            + ", ".join(f"{name} = ?" for name, _ in AGENT_COLUMNS[1:])
            + " WHERE agent_id = ?"
        ),
        anchors_put=q(_ANCHOR_PUT),
    )


SQLITE = _render("?", "", "IN (SELECT value FROM json_each(?))")
POSTGRES = _render("%s", " FOR UPDATE", "= ANY(?)")

_SQLITE_ROWS = (
    "SELECT a.agent_id, a.version, a.status, a.wake_at, COALESCE(l.epoch, 0) FROM agents a "
    "LEFT JOIN leases l ON l.agent_id = a.agent_id WHERE a.agent_id "
)
SQLITE_ROWS = _SQLITE_ROWS + "IN (SELECT value FROM json_each(?))"
"""SQLite's rows and epochs of a set of agents (a JSON array) in one statement: its
``BEGIN IMMEDIATE`` holds the database, so no acquisition can come between the
two as it can on PostgreSQL (see :attr:`Statements.epochs`)."""
SQLITE_ROW = _SQLITE_ROWS + "= ?"
"""The same for one agent, a commit's usual case, without the JSON."""

POSTGRES_GROUP_WRITE = POSTGRES.q(
    "WITH d AS (SELECT ?::json AS j), "
    f"e AS (INSERT INTO events ({_names(PG_EVENT_COLUMNS)}) "
    f"SELECT {', '.join(_from_json(PG_EVENT_COLUMNS, 'r'))} "
    "FROM d, json_array_elements(d.j->0) AS r), "
    "s AS (UPDATE agents AS a SET "
    + ", ".join(
        f"{name} = {cast}"
        for (name, _), cast in zip(AGENT_COLUMNS, _from_json(AGENT_COLUMNS, "r"), strict=True)
        if name != "agent_id"
    )
    + " FROM d, json_array_elements(d.j->1) AS r WHERE a.agent_id = r->>0), "
    f"n AS (INSERT INTO anchors ({_names(ANCHOR_COLUMNS)}) "
    f"SELECT {', '.join(_from_json(ANCHOR_COLUMNS, 'r'))} FROM d, json_array_elements(d.j->2) AS r "
    f"ON CONFLICT (agent_id) DO UPDATE SET {_updates(ANCHOR_COLUMNS)}) "
    "SELECT count(pg_notify(?, t)) FROM d, json_array_elements_text(d.j->3) AS t"
)
"""A group commit's writes on PostgreSQL in one statement: every event, every agent
row, every anchor, and a notification for each agent given work. The rows travel
as one JSON text (encoded in C) rather than one array per column: psycopg writes
a text-format array's elements one by one in Python (about 1 ms for four 2 kB
texts here), and binary arrays (``%b``), which copy a large text cheaply, cost
more than the JSON for the usual group of a few small batches (25 arrays to
dump; measured 2026-12 with psycopg 3.3). The text of the statement never
changes, so the connection prepares it once."""


def anchor_row(a: Anchor) -> tuple[object, ...]:
    """An anchor as its row, in :data:`ANCHOR_COLUMNS` order."""
    return (
        a.agent_id, a.version, a.head_hash, a.state_hash, a.verified, a.public_key,
        a.signature, a.spec_hash, a.epoch,
    )  # fmt: skip


@dataclass(slots=True)
class Stored:
    """An agent's row as a write finds it under its lock."""

    version: int
    status: str
    wake_at: float | None
    epoch: int


@dataclass(slots=True)
class Kept:
    """A batch that passed every check, and its agent's row before it."""

    batch: Batch
    anchor: Anchor
    before: Stored


def plan(
    batches: Sequence[Batch],
    rows: dict[str, Stored],
    touch: Callable[[Batch], None],
) -> tuple[list[Kept], list[SteadError | None]]:
    """Which batches to write, in agent-id order, and each batch's refusal (or None).

    ``rows`` holds the locked rows of the batches' agents (changed here as each
    kept batch moves its agent on); ``touch`` makes or consumes a batch's
    snapshot rows (hibernated, restored) and writes the spec an upgrade puts in
    force, in a savepoint of its own, raising to refuse it.
    """
    results: list[SteadError | None] = [None] * len(batches)
    kept: list[Kept] = []
    for i in sorted(range(len(batches)), key=lambda i: batches[i].state.agent_id):
        b = batches[i]
        try:
            check_batch(b)
            agent_id = b.events[0].agent_id
            if agent_id != b.state.agent_id:
                raise StoreError(f"agent {agent_id}: the state to store is another agent's")
            row = rows.get(agent_id)
            if row is None:
                raise NotFound(f"no agent with id {agent_id}")
            check_write(agent_id, b.epoch, row.epoch, b.expected_version, row.version)
            if any(e.kind in TOUCHING_KINDS for e in b.events):
                touch(b)
        except (StoreError, NotFound) as exc:
            results[i] = exc
            continue
        kept.append(Kept(b, b.anchor_or_default(), row))
        rows[agent_id] = Stored(b.state.version, b.state.status, wake_at(b.state), row.epoch)
    return kept, results


def agent_rows(kept: Sequence[Kept], at: float) -> list[tuple[object, ...]]:
    """The agent rows to write, in :data:`AGENT_COLUMNS` order: each agent's last."""
    last = {k.batch.state.agent_id: k for k in kept}
    return [
        (
            agent_id,
            k.batch.state.version,
            k.batch.state.status,
            state_row(k.batch.state, k.anchor),
            at,
            wake_at(k.batch.state),
        )
        for agent_id, k in last.items()
    ]


def anchor_rows(kept: Sequence[Kept]) -> list[tuple[object, ...]]:
    """The anchors to write: each agent's last (an upsert may change a row once)."""
    return [anchor_row(a) for a in {k.anchor.agent_id: k.anchor for k in kept}.values()]


def group_json(
    kept: Sequence[Kept], at: float, told: Sequence[str], row: Callable[[Event], Sequence[object]]
) -> str:
    """:data:`POSTGRES_GROUP_WRITE`'s one parameter: the events (each made a row by the
    store's ``row``), the agent rows, the anchors, and the agents to tell of work."""
    events = [row(e) for k in kept for e in k.batch.events]
    return json.dumps(
        [events, agent_rows(kept, at), anchor_rows(kept), list(told)],
        ensure_ascii=False,
        allow_nan=False,
    )
