"""stead only: what running a command in the sandbox costs over a plain subprocess.

A trivial command (``/bin/true``, and ``/bin/sh -c 'echo hi'``) is run three
ways, exactly as a tool runs one (``run(argv, workspace, env={"PATH": ...},
limits=Limits())``): through the sandbox stead would pick here
(``stead.sandbox.select.select()``, normally bubblewrap) as a one-shot run;
through a :class:`~stead.sandbox.session.SandboxSession` over that sandbox,
as an activation runs its commands (the session already started); and as a
plain ``subprocess.run(argv, cwd=workspace)`` with its output captured. The
three take turns run by run (the order rotates every run) after a warm-up.

A one-shot run pays everything a fresh sandbox costs: making and removing a
pids cgroup (when the machine lets stead make one), the launcher ``/bin/sh``
with its ``ulimit``s, and bubblewrap creating its namespaces and mounts before
it execs the command. A session run pays one request line to the shell loop
inside the session's bubblewrap, a fork and exec there, and the clean-up after
the command (``kill -1``, emptying ``/tmp`` and ``/dev/shm``). What a session
costs to start (its first command included) and to close, once per
activation, is timed separately on fresh sessions; so is making and removing
a pids cgroup. The peers have no sandbox, so there is nothing to compare.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stead.errors import SandboxUnavailable
from stead.sandbox import bwrap
from stead.sandbox.base import Limits
from stead.sandbox.select import select
from stead.sandbox.session import SandboxSession

from .machine import loadavg
from .stats import median, pct

COMMANDS: dict[str, list[str]] = {
    "true": ["/bin/true"],
    "echo": ["/bin/sh", "-c", "echo hi"],
}
EXPECTED_STDOUT = {"true": "", "echo": "hi\n"}
ENV = {"PATH": "/usr/bin:/bin"}
WARMUP = 10
SESSION_STARTS = 20
KINDS = ("sandbox", "session", "plain")  # "sandbox" is the one-shot run


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def _stats(prefix: str, times_ms: Sequence[float]) -> dict[str, float]:
    return {
        f"{prefix}_median_ms": median(times_ms),
        f"{prefix}_p10_ms": pct(times_ms, 10),
        f"{prefix}_p90_ms": pct(times_ms, 90),
    }


def _bwrap_version(binary: str) -> str:
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "unknown"
    return proc.stdout.strip() or "unknown"


def measure(workdir: Path, runs: int) -> dict[str, Any]:
    """Median wall time of trivial commands one-shot, in a session and plain, ``runs`` each."""
    workdir.mkdir(parents=True, exist_ok=True)
    workspace = workdir / "workspace"
    workspace.mkdir(exist_ok=True)
    try:
        sandbox = select()  # probes bubblewrap once per process: not timed
    except SandboxUnavailable as e:
        return {"sandbox": None, "skipped": str(e), "runs": 0}
    limits = Limits()
    cgroup_root = bwrap.pids_cgroup_root() if sandbox.name == "bubblewrap" else None
    binary = getattr(sandbox, "binary", None)
    session = SandboxSession(sandbox, workspace)

    def via(box: Any, argv: list[str]) -> Callable[[], tuple[int | None, str]]:
        def go() -> tuple[int | None, str]:
            r = box.run(argv, workspace, env=ENV, limits=limits)
            return r.exit_code, r.stdout

        return go

    def plain(argv: list[str]) -> Callable[[], tuple[int | None, str]]:
        def go() -> tuple[int | None, str]:
            r = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, check=False)
            return r.returncode, r.stdout

        return go

    def cgroup_once() -> None:
        group = bwrap._make_pids_cgroup(limits.processes)
        if group is None:
            raise RuntimeError(f"could not make a pids cgroup under {cgroup_root}")
        bwrap._remove_cgroup(group)

    def check(kind: str, argv: list[str], name: str, got: tuple[int | None, str]) -> None:
        if got != (0, EXPECTED_STDOUT[name]):
            raise RuntimeError(f"sandbox overhead: {kind} {argv} gave {got!r}")

    times: dict[str, dict[str, list[float]]] = {
        name: {kind: [] for kind in KINDS} for name in COMMANDS
    }
    cgroup_ms: list[float] = []
    load_start = loadavg()
    started = time.perf_counter()
    try:
        for i in range(WARMUP + runs):
            for name, argv in COMMANDS.items():
                fns = {"sandbox": via(sandbox, argv), "session": via(session, argv)}
                fns["plain"] = plain(argv)
                turn = i % len(KINDS)
                for kind in KINDS[turn:] + KINDS[:turn]:
                    ms, got = _timed(fns[kind])
                    check(kind, argv, name, got)
                    if i >= WARMUP:
                        times[name][kind].append(ms)
            if cgroup_root is not None:
                ms, _ = _timed(cgroup_once)
                if i >= WARMUP:
                    cgroup_ms.append(ms)
    finally:
        session.close()
    start_ms, close_ms = [], []
    for _ in range(SESSION_STARTS):
        fresh = SandboxSession(sandbox, workspace)
        ms, got = _timed(via(fresh, COMMANDS["true"]))
        check("session start", COMMANDS["true"], "true", got)
        start_ms.append(ms)
        ms, _ = _timed(fresh.close)
        close_ms.append(ms)
    wall_s = time.perf_counter() - started

    commands: dict[str, Any] = {}
    for name, argv in COMMANDS.items():
        row: dict[str, Any] = {"argv": argv}
        for kind in KINDS:
            row.update(_stats(kind, times[name][kind]))
        base = row["plain_median_ms"]
        row["overhead_ms"] = row["sandbox_median_ms"] - base
        row["ratio"] = row["sandbox_median_ms"] / base
        row["session_overhead_ms"] = row["session_median_ms"] - base
        row["session_ratio"] = row["session_median_ms"] / base
        commands[name] = row
    return {
        "sandbox": sandbox.name,
        "binary": binary,
        "version": _bwrap_version(binary) if binary else None,
        "pids_cgroup": cgroup_root is not None,
        "pids_cgroup_root": str(cgroup_root) if cgroup_root is not None else None,
        "runs": runs,
        "warmup": WARMUP,
        "env": ENV,
        "limits": dataclasses.asdict(limits),
        "commands": commands,
        "cgroup_make_remove_ms": (
            {"median_ms": median(cgroup_ms), "p90_ms": pct(cgroup_ms, 90)} if cgroup_ms else None
        ),
        "session_start_ms": {
            "median_ms": median(start_ms),
            "p90_ms": pct(start_ms, 90),
            "runs": SESSION_STARTS,
            "what": "a fresh session's first /bin/true, start included",
        },
        "session_close_ms": {"median_ms": median(close_ms), "p90_ms": pct(close_ms, 90)},
        "wall_s": wall_s,
        "loadavg_start": load_start,
        "loadavg_end": loadavg(),
    }


if __name__ == "__main__":
    import argparse
    import tempfile
    from datetime import UTC, datetime

    p = argparse.ArgumentParser(prog="python -m bench.sandbox_overhead", description=__doc__)
    p.add_argument("--runs", type=int, default=200, help="runs of each command, each way (200)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix=".work-", dir=Path(__file__).parent) as tmp:
        result = measure(Path(tmp), args.runs)
    result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    print(json.dumps(result, indent=2))
