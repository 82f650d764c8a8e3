"""stead only: what running a command in the sandbox costs over a plain subprocess.

A trivial command (``/bin/true``, and ``/bin/sh -c 'echo hi'``) is run through
the sandbox stead would pick here (``stead.sandbox.select.select()``, normally
bubblewrap) exactly as a tool runs one, ``run(argv, workspace, env={"PATH":
...}, limits=Limits())``, and through a plain ``subprocess.run(argv,
cwd=workspace)`` (with its output captured, as the sandbox captures it), the
two alternating run by run (the sandbox first on even runs, the plain one on
odd ones) after a warm-up. Each sandboxed run includes everything a tool's
command pays: making and removing a pids cgroup (when the machine lets stead
make one), the launcher ``/bin/sh`` with its ``ulimit``s, and bubblewrap
creating its namespaces and mounts before it execs the command. The cost of a
pids cgroup alone (make, set ``pids.max``, check it is empty, remove) is timed
in the same loop. The peers have no sandbox, so there is nothing to compare.
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

from .machine import loadavg
from .stats import median, pct

COMMANDS: dict[str, list[str]] = {
    "true": ["/bin/true"],
    "echo": ["/bin/sh", "-c", "echo hi"],
}
EXPECTED_STDOUT = {"true": "", "echo": "hi\n"}
ENV = {"PATH": "/usr/bin:/bin"}
WARMUP = 10


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
    """Median wall time of trivial commands in the sandbox and plain, ``runs`` of each."""
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

    def boxed(argv: list[str]) -> Callable[[], tuple[int | None, str]]:
        def go() -> tuple[int | None, str]:
            r = sandbox.run(argv, workspace, env=ENV, limits=limits)
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

    times: dict[str, dict[str, list[float]]] = {
        name: {"sandbox": [], "plain": []} for name in COMMANDS
    }
    cgroup_ms: list[float] = []
    load_start = loadavg()
    started = time.perf_counter()
    for i in range(WARMUP + runs):
        for name, argv in COMMANDS.items():
            pair = [("sandbox", boxed(argv)), ("plain", plain(argv))]
            for kind, fn in pair if i % 2 == 0 else pair[::-1]:
                ms, (code, stdout) = _timed(fn)
                if code != 0 or stdout != EXPECTED_STDOUT[name]:
                    raise RuntimeError(
                        f"sandbox overhead: {kind} {argv} exited {code} with {stdout!r}"
                    )
                if i >= WARMUP:
                    times[name][kind].append(ms)
        if cgroup_root is not None:
            ms, _ = _timed(cgroup_once)
            if i >= WARMUP:
                cgroup_ms.append(ms)
    wall_s = time.perf_counter() - started

    commands: dict[str, Any] = {}
    for name, argv in COMMANDS.items():
        box, raw = times[name]["sandbox"], times[name]["plain"]
        row: dict[str, Any] = {"argv": argv}
        row.update(_stats("sandbox", box))
        row.update(_stats("plain", raw))
        row["overhead_ms"] = row["sandbox_median_ms"] - row["plain_median_ms"]
        row["ratio"] = row["sandbox_median_ms"] / row["plain_median_ms"]
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
