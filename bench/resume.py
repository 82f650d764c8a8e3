"""Resume cost versus history length.

For each history length, an agent's journal is filled to exactly that many
events by committing, through the store and in large batches, the same events
the runtime journals for real steps (see :func:`bench.workload.step_events`).
Then a fresh Python process opens a new ``Runtime`` on the database file and
runs ONE step (:mod:`bench._child`); the time from opening the store to the
step's last commit is the resume cost. A fresh process means nothing is cached
in Python; the operating system's page cache is warm (the file was just
written), as it would be for an agent resumed on the machine that ran it.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stead import Kind, Runtime
from stead.clock import SystemClock
from stead.ids import new_id
from stead.integrity.anchoring import RECHECKED
from stead.journal import NewEvent, seal
from stead.state import State, apply
from stead.store.anchors import Anchor
from stead.store.base import Store

from . import workload
from .workload import REPO_ROOT

BATCH_EVENTS = 5_000
"""Events per commit when building a history."""

EXPECTED_KINDS = [Kind.ACTIVATION_STARTED, *workload.STEP_KINDS]
"""What one resumed activation that runs one step journals."""


@dataclass
class History:
    events: int
    db: Path
    data_dir: Path
    agent_id: str
    decisions: int
    build_s: float
    db_bytes: int
    url: str = ""
    """The store's URL where it is not the SQLite file ``db``."""


def build(workdir: Path, events: int, url: str = "") -> History:
    """An agent whose journal holds exactly ``events`` events (at least 2), not counting
    the grants its creation records (one per tool its spec lists); on SQLite, or in
    the store ``url``."""
    if events < 2:
        raise ValueError("a history has at least agent_created and activation_started")
    workdir.mkdir(parents=True, exist_ok=True)
    db, data = workdir / "stead.db", workdir / "data"
    clock = SystemClock()
    rng = random.Random(events)
    t0 = time.perf_counter()
    rt = Runtime(url or f"sqlite:///{db}", data_dir=data, clock=clock)
    try:
        store = rt.store
        state = rt.create(workload.spec(workdir, script_len=1))
        agent_id = state.agent_id
        grants = state.version - 1  # recorded with agent_created: the spec's scope
        owner = "bench-history-builder"
        lease = store.acquire_lease(agent_id, owner, 3600.0, clock.now())
        batch = [
            NewEvent(
                Kind.ACTIVATION_STARTED,
                {"worker": owner, "epoch": lease.epoch, "activation": new_id("act", clock, rng)},
            )
        ]
        steps, padding = divmod(events - 2, len(workload.STEP_KINDS))
        for step in range(1, steps + 1):
            batch += workload.step_events(agent_id, step, clock, rng)
            if len(batch) >= BATCH_EVENTS:
                state = _commit(store, state, batch, lease.epoch, clock.now())
                batch = []
        # pad to the exact length with memory writes outside any step
        batch += [
            NewEvent(Kind.MEMORY_WRITTEN, {"values": {"looked_up": steps}}) for _ in range(padding)
        ]
        if batch:
            state = _commit(store, state, batch, lease.epoch, clock.now())
        store.release_lease(lease)
    finally:
        rt.close()  # the last connection closing checkpoints the WAL into the main file
    build_s = time.perf_counter() - t0
    if state.version != events + grants or state.decisions != steps:
        raise RuntimeError(f"built {state.version} events, wanted {events} + {grants} grants")
    size = _db_bytes(db) if not url else 0
    return History(events, db, data, agent_id, steps, build_s, size, url)


def _commit(store: Store, state: State, batch: list[NewEvent], epoch: int, at: float) -> State:
    """``store.commit``, anchored as an activation anchors its commits: all but its
    newest ``RECHECKED`` events counted as checked (it sealed them itself), so a resume
    checks what it would check after a real activation of this length."""
    sealed = seal(state.agent_id, state.version + 1, state.head_hash, at, epoch, batch)
    new = state
    for ev in sealed:
        new = apply(new, ev)
    anchor = Anchor.of(new, max(0, new.version - RECHECKED), epoch=epoch)
    store.append(sealed, new, expected_version=state.version, epoch=epoch, at=at, anchor=anchor)
    return new


def _db_bytes(db: Path) -> int:
    total = 0
    for suffix in ("", "-wal"):
        path = Path(f"{db}{suffix}")
        if path.exists():
            total += path.stat().st_size
    return total


def resume_once(history: History) -> dict[str, Any]:
    """Resume the agent in a fresh process and run one step; return the child's timings."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench._child",
            history.url or str(history.db),
            str(history.data_dir),
            history.agent_id,
            str(history.decisions),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    process_ms = (time.perf_counter() - t0) * 1e3
    if proc.returncode != 0:
        raise RuntimeError(f"resume child failed ({proc.returncode}):\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout)
    if result["kinds"] != EXPECTED_KINDS:
        raise RuntimeError(
            f"a resumed step journaled {result['kinds']}, expected {EXPECTED_KINDS}; "
            "bench.workload.step_events no longer matches the runtime"
        )
    history.decisions = result["decisions"]
    result["process_ms"] = process_ms
    return result
