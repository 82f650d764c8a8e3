"""The floor: one small durable SQLite commit, set up exactly as stead sets up SQLite.

WAL journal, ``synchronous=FULL``, ``BEGIN IMMEDIATE``, one INSERT of a
200-byte row, ``COMMIT``. Nothing stead does per commit can be cheaper than
this on the same disk, so step costs are quoted as a multiple of it.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from .stats import median, pct

ROW = "r" * 200
WARMUP = 20


def measure(workdir: Path, commits: int) -> dict[str, Any]:
    """Time ``commits`` single-row durable commits into a fresh database."""
    db = sqlite3.connect(str(workdir / "floor.db"), isolation_level=None)
    try:
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, data TEXT NOT NULL)")
        times: list[float] = []
        for i in range(WARMUP + commits):
            t0 = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO rows (data) VALUES (?)", (ROW,))
            db.execute("COMMIT")
            if i >= WARMUP:
                times.append(time.perf_counter() - t0)
    finally:
        db.close()
    times_ms = [t * 1e3 for t in times]
    return {
        "commits": commits,
        "median_ms": median(times_ms),
        "p10_ms": pct(times_ms, 10),
        "p90_ms": pct(times_ms, 90),
        "p99_ms": pct(times_ms, 99),
    }
