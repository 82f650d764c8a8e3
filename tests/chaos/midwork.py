"""Where a kill landed, measured in the store instead of assumed from a delay.

A chaos test that kills a worker a fixed time after starting it assumes how far
the worker gets in that time; on a loaded machine it may not have taken an
agent at all, and the kill tests nothing. With these helpers a test waits until
a worker is visibly inside an activation, stops it (SIGSTOP: it can write
nothing more), reads which activations it was in the middle of, and only then
SIGKILLs it. So each test counts the kills that landed mid-work, keeps killing
until enough have, and checks afterwards that each activation it cut short was
taken up again.

An activation is *in progress* when its agent is ``running``, its lease names
the worker's process (``host:pid:nonce``), and the agent's newest event was
written under that lease's epoch: its ``activation_started`` at least is
journaled, and nothing has ended it (an activation that ends gives its lease
back, which blanks the owner). The stores of both kinds share the tables read
here.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from stead import Kind
from stead.journal import Event
from tests.postgres import SERVER

_IN_PROGRESS = (
    "SELECT l.agent_id, l.owner, l.epoch, e.kind FROM {leases} l "
    "JOIN {agents} a ON a.agent_id = l.agent_id "
    "JOIN {events} e ON e.agent_id = a.agent_id AND e.seq = a.version "
    "WHERE a.status = 'running' AND l.owner <> '' AND e.epoch = l.epoch"
)
_UNFINISHED = "SELECT count(*) FROM {agents} WHERE status NOT IN ('completed', 'failed', 'moved')"


@dataclass(frozen=True, slots=True)
class Cut:
    """One activation in progress: the agent, the worker's process, its lease's epoch
    and the kind of the agent's newest event (``tool_intent``: inside a call)."""

    agent_id: str
    pid: int
    epoch: int
    head: str


def pid_of(owner: str) -> int | None:
    """The process id in a lease owner ``host:pid:nonce``."""
    pid = owner.split(":")[1] if owner.count(":") >= 2 else ""
    return int(pid) if pid.isdigit() else None


class Watch:
    """Reads a store's activations in progress, through a connection of its own
    (:meth:`close` closes it)."""

    def __init__(
        self, query: Callable[[str], list[tuple[Any, ...]]], close: Callable[[], None]
    ) -> None:
        self._query = query
        self.close = close

    @classmethod
    def sqlite(cls, db: Path) -> Watch:
        conn = sqlite3.connect(db, timeout=30)  # a reader: WAL never makes it wait
        names = {"leases": "leases", "agents": "agents", "events": "events"}
        return cls(lambda q: conn.execute(q.format(**names)).fetchall(), conn.close)

    @classmethod
    def postgres(cls, schema: str) -> Watch:
        conn = psycopg.connect(SERVER, autocommit=True)

        def query(q: str) -> list[tuple[Any, ...]]:
            names = {t: sql.Identifier(schema, t) for t in ("leases", "agents", "events")}
            return conn.execute(sql.SQL(q).format(**names)).fetchall()

        return cls(query, conn.close)

    def in_progress(self) -> list[Cut]:
        cuts = []
        for agent_id, owner, epoch, head in self._query(_IN_PROGRESS):
            pid = pid_of(str(owner))
            if pid is not None:
                cuts.append(Cut(str(agent_id), pid, int(epoch), str(head)))
        return cuts

    def busy(self) -> set[int]:
        """The processes inside at least one activation now."""
        return {c.pid for c in self.in_progress()}

    def unfinished(self) -> int:
        """How many agents of the store have not reached a final status."""
        return int(self._query(_UNFINISHED)[0][0])


def wait_busy(proc: subprocess.Popen[bytes], watch: Watch, timeout: float = 120) -> bool:
    """Wait until ``proc`` is inside an activation (True) or has exited (False). The
    bound is for a worker that hangs; a slow start is waited out."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if proc.pid in watch.busy():
            return True
        assert time.monotonic() < deadline, f"process {proc.pid} took no agent in {timeout} s"
        time.sleep(0.005)
    return False


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGSTOP ``proc`` and wait until every thread of it has stopped: from then on it
    can write nothing, so what the store holds is all it did."""
    proc.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            states = [
                (task / "stat").read_text().rpartition(")")[2].split()[0]
                for task in Path(f"/proc/{proc.pid}/task").iterdir()
            ]
        except (OSError, IndexError):
            return  # it is gone (or going): it writes nothing more either way
        if all(s in "TtZX" for s in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {proc.pid} did not stop within 10 s of SIGSTOP")


# its sessions: how many have a transaction open, and how many of those have written
# (hold a transaction id) and wait idle for the client's next statement
_SESSIONS = (
    "SELECT count(*) FILTER (WHERE xact_start IS NOT NULL), count(*) FILTER (WHERE "
    "backend_xid IS NOT NULL AND state = 'idle in transaction'), max(state_change) "
    "FROM pg_stat_activity WHERE application_name = %s"
)


def stop_where(
    proc: subprocess.Popen[bytes],
    app: str,
    wanted: Callable[[int, int], bool],
    also: Callable[[], bool] = lambda: True,
    timeout: float = 60,
) -> None:
    """SIGSTOP ``proc`` (a worker whose PostgreSQL sessions carry ``application_name``
    ``app``) at a moment ``wanted(open, writing)`` holds of its sessions' transactions
    (counted as in :data:`_SESSIONS`) and ``also()`` holds; it is left stopped. Each
    try stops it, waits until the server's view of its sessions has settled (what it
    sent before it stopped processed: two looks a while apart agree), and lets it go
    on a random moment if this was not such a moment."""
    with psycopg.connect(SERVER, autocommit=True) as db:
        deadline = time.monotonic() + timeout
        while True:
            stop(proc)
            seen = db.execute(_SESSIONS, (app,)).fetchone()
            settle = 0.05
            while True:
                time.sleep(settle)
                now = db.execute(_SESSIONS, (app,)).fetchone()
                if now == seen:
                    break
                seen, settle = now, min(settle * 2, 1.0)
            assert seen is not None
            if wanted(int(seen[0]), int(seen[1])) and also():
                return
            proc.send_signal(signal.SIGCONT)
            assert time.monotonic() < deadline, f"never caught {app} where it was wanted"
            time.sleep(random.uniform(0.0, 0.03))


def kill_measured(proc: subprocess.Popen[bytes], watch: Watch) -> list[Cut]:
    """Stop ``proc``, read the activations it is in the middle of, SIGKILL it and reap
    it: those activations are the ones this kill cut short (none: it landed between
    activations, or before the worker took any)."""
    stop(proc)
    try:
        cut = [c for c in watch.in_progress() if c.pid == proc.pid]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    return cut


def taken_up_again(events: Sequence[Event], cut: Cut) -> bool:
    """Whether an agent's journal shows ``cut``: an activation of the killed process
    under its epoch, and a later one, under a higher epoch, that went on with it."""
    started = [e for e in events if e.kind == Kind.ACTIVATION_STARTED]
    mine = [e for e in started if e.epoch == cut.epoch and pid_of(e.data["worker"]) == cut.pid]
    return bool(mine) and any(e.epoch > cut.epoch for e in started)
