"""What every peer script shares: stead's bench agent restated without stead, and the CLI.

The agent is the one in :mod:`bench.workload`: decision ``i`` calls ``lookup``
with key ``item-{i:06d}`` (its result is 100 bytes of JSON) and remembers two
fixed keys, so the agent's memory stays the same size however long it runs.
This module must not import stead: it runs in ``.venv-peers``.

Every command prints one JSON object on stdout; progress and the peers' own
logging go to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ..stats import median, pct

OUTPUT_BYTES = 100
_FIXED = 46
"""The bytes of lookup's JSON result other than its padding, for 11-character keys."""
_VALUE = "x" * (OUTPUT_BYTES - _FIXED)
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def decision_data(i: int) -> dict[str, Any]:
    """Decision ``i``: one tool call and one memory write (as ``bench.workload``)."""
    key = f"item-{i:06d}"
    return {
        "actions": [
            {"tool": "lookup", "args": {"key": key}},
            {"remember": {"last_key": key, "looked_up": i + 1}},
        ]
    }


def lookup(key: str) -> dict[str, Any]:
    """The tool: a stand-in for a small API call, 100 bytes of JSON."""
    return {"key": key, "status": "ok", "value": _VALUE}


def run_tool(decision: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Carry out a decision: the tool's result and the memory it writes."""
    call, remember = decision["actions"]
    return lookup(**call["args"]), dict(remember["remember"])


class Marks:
    """Clock readings at the start of every decision, to time steps one by one."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def mark(self) -> None:
        self.times.append(time.perf_counter())

    def step_ms(self) -> list[float]:
        t = self.times
        return [(b - a) * 1e3 for a, b in itertools.pairwise(t)]


def cpu_fields(cpu_s: float | None, steps: int) -> dict[str, Any]:
    """This process's CPU time (user + system, every thread) over the timed part, per step:
    what the system costs the machine, which a busy shared machine distorts less than
    wall time (a process waiting for the processor accrues none)."""
    if cpu_s is None:
        return {}
    return {"cpu_s": cpu_s, "cpu_ms_per_step": cpu_s * 1e3 / steps}


def steps_result(
    steps: int, wall_s: float, marks: Marks, cpu_s: float | None = None, **extra: Any
) -> dict[str, Any]:
    """The W1/W2 summary every peer reports."""
    step_ms = marks.step_ms()
    return {
        **cpu_fields(cpu_s, steps),
        "steps": steps,
        "wall_s": wall_s,
        "steps_per_s": steps / wall_s,
        "ms_per_step": median(step_ms) if step_ms else wall_s * 1e3 / steps,
        "p90_ms_per_step": pct(step_ms, 90),
        "p99_ms_per_step": pct(step_ms, 99),
        "wall_ms_per_step": wall_s * 1e3 / steps,
        **extra,
    }


def window_at(target: float, per_step: float, window: int, least: int = 5) -> int:
    """The steps the step-cost curve measures at ``target`` tokens: ``window``, but fewer
    where they would grow a short conversation by more than half its size (at least
    ``least``), so that a point stays near its size."""
    return max(least, min(window, int(target / 2 / per_step)))


# -- SQLite ---------------------------------------------------------------------


def many_result(
    agents: int, steps: int, wall_s: float, cpu_s: float | None = None, **extra: Any
) -> dict[str, Any]:
    """W2's result for ``agents`` agents of ``steps`` steps each, run in ``wall_s``."""
    total = agents * steps
    return {
        **cpu_fields(cpu_s, total),
        "agents": agents,
        "steps_per_agent": steps,
        "steps": total,
        "wall_s": wall_s,
        "steps_per_s": total / wall_s,
        "wall_ms_per_step": wall_s * 1e3 / total,
        **extra,
    }


def sqlite_settings(conn: Any) -> dict[str, Any]:
    """``journal_mode`` and ``synchronous`` as a live connection reports them."""
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = int(conn.execute("PRAGMA synchronous").fetchone()[0])
    return {"journal_mode": str(mode).upper(), "synchronous": SYNCHRONOUS.get(sync, str(sync))}


def sqlite_library_defaults() -> dict[str, Any]:
    """What a plain connection gets on this machine when nobody sets anything."""
    conn = sqlite3.connect(":memory:")
    try:
        sync = int(conn.execute("PRAGMA synchronous").fetchone()[0])
        options = [r[0] for r in conn.execute("PRAGMA compile_options")]
    finally:
        conn.close()
    wal_default = [o for o in options if o.startswith("DEFAULT_WAL_SYNCHRONOUS")]
    return {
        "sqlite": sqlite3.sqlite_version,
        "synchronous": SYNCHRONOUS.get(sync, str(sync)),
        "wal_synchronous_option": wal_default[0] if wal_default else None,
    }


def db_bytes(path: Path) -> int:
    """The database's size on disk, with its WAL and rollback journal if any."""
    total = 0
    for suffix in ("", "-wal", "-journal"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            total += p.stat().st_size
    return total


def versions(*dists: str) -> dict[str, str]:
    out = {}
    for d in dists:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = "not installed"
    return out


def installed() -> dict[str, str]:
    """Every distribution in this venv and its version (the peers' full environment)."""
    return dict(sorted((d.metadata["Name"], d.version) for d in metadata.distributions()))


# -- output and CLI ---------------------------------------------------------------


def emit(obj: dict[str, Any]) -> None:
    """Print the one JSON result and flush (some commands end with ``os._exit``)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def hard_exit(obj: dict[str, Any] | None = None) -> None:
    """Emit ``obj`` and end the process at once, as SIGKILL would: no cleanup runs."""
    if obj is not None:
        emit(obj)
    sys.stderr.flush()
    os._exit(0)


Command = Callable[[argparse.Namespace], dict[str, Any] | None]


def main(argv: Sequence[str], prog: str, commands: dict[str, Command]) -> int:
    """Parse ``COMMAND --dir D [--steps N] [--agents A] [--variant V] ...`` and run it."""
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("command", choices=sorted(commands))
    p.add_argument("--dir", type=Path, required=True, help="a folder for the databases")
    p.add_argument("--steps", type=int, default=1000, help="agent steps (per agent)")
    p.add_argument("--agents", type=int, default=1, help="agents (W2)")
    p.add_argument("--variant", default="", help="a peer-specific setting (see each peer)")
    p.add_argument("--url", default="", help="PostgreSQL: the server (bench.peers.pg)")
    p.add_argument("--schema", default="", help="PostgreSQL: the run's own schema")
    p.add_argument("--model-url", default="", help="in flight: the fake model's base URL")
    p.add_argument("--latency", type=float, default=1.0, help="in flight: the model's latency")
    p.add_argument("--pool", type=int, default=0, help="in flight: connections (0: the peer's)")
    args = p.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    result = commands[args.command](args)
    if result is not None:
        emit(result)
    return 0
