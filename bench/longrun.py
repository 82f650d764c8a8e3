"""The first resume after one long activation (beside W3).

W3's histories are built by committing events directly: each resume there
starts from a journal whose every commit came from outside an activation. An
agent that runs long in ONE activation is different: whatever the activation
committed may still have to be checked at the next resume. Here one agent runs
``steps`` steps of the bench agent (scripted model, SQLite, ``synchronous=FULL``)
in one activation in a child process, which SIGKILLs itself from the commit that
ends step ``steps - 1`` (``--long-end`` lets it end normally instead). Then, for
each repetition, on a fresh copy of the database as the kill left it (its WAL
included): a fresh process opens a ``Runtime`` and runs one step
(:mod:`bench._child`, timed from before opening to the step's last commit, with
its processor time), and then a second fresh process does the same: the first
resume and the one after it.

``python -m bench.longrun [--steps N]`` runs it alone and prints JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stead.store import codec

from .stats import median
from .workload import REPO_ROOT

STEPS = 100_000
QUICK_STEPS = 5_000
REPS = 3


def _python(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )


def child(db: Path, data: Path, workdir: Path, steps: int, kill: bool) -> None:
    """In the child: create the agent, print its id, run ``steps`` steps in one activation,
    printing progress as JSON; SIGKILL itself at the commit that ends step ``steps - 1``."""
    from stead import Event, Kind, Runtime

    from . import workload

    rt = Runtime(f"sqlite:///{db}", data_dir=data)
    agent_id = rt.create(workload.spec(workdir)).agent_id
    model = workload.model(steps)  # built before the clock starts
    done = 0
    t0, c0 = time.perf_counter(), time.process_time()

    def progress(ended: bool) -> None:
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(json.dumps({"agent_id": agent_id, "steps": done, "ended": ended,
                          "wall_s": wall, "cpu_s": cpu}), flush=True)  # fmt: skip

    def on_commit(events: Sequence[Event]) -> None:
        nonlocal done
        done += sum(1 for e in events if e.kind == Kind.STEP_COMPLETED)
        if kill and done >= steps - 1:
            progress(False)
            os.kill(os.getpid(), signal.SIGKILL)

    rt.run(agent_id, model=model, tools=workload.TOOLS, max_steps=steps, on_commit=on_commit)
    rt.close()
    progress(True)


def _resume(db: Path, data: Path, agent_id: str, decisions: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = _python(["bench._child", str(db), str(data), agent_id, str(decisions)])
    process_ms = (time.perf_counter() - t0) * 1e3
    if proc.returncode != 0:
        raise RuntimeError(f"resume child failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(proc.stdout)
    out["process_ms"] = process_ms
    return out


def _copy(src: Path, dst: Path) -> None:
    """The database as the kill left it (main file, WAL, shared memory) and the data dir."""
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_dir():
            shutil.copytree(p, dst / p.name)
        else:
            shutil.copy2(p, dst / p.name)


def measure(workdir: Path, steps: int, reps: int = REPS, kill: bool = True) -> dict[str, Any]:
    """Run the long activation once, then ``reps`` pairs of resumes on copies of it."""
    run = workdir / "long"
    run.mkdir(parents=True)
    db, data = run / "stead.db", run / "data"
    argv = ["bench.longrun", "--child", str(db), str(data), str(workdir), str(steps)]
    proc = _python([*argv, "--kill" if kill else "--end"])
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    killed = proc.returncode == -signal.SIGKILL
    if not lines or (proc.returncode != 0 and not killed):
        raise RuntimeError(
            f"the long activation failed ({proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    activation = lines[-1]
    if activation["steps"] < steps - 1:
        raise RuntimeError(f"the long activation made {activation['steps']} of {steps} steps")
    # the decisions committed: the kill may leave the next step's decision journaled
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        row = con.execute(
            "SELECT state FROM agents WHERE agent_id = ?", (activation["agent_id"],)
        ).fetchone()
    decisions = int(json.loads(codec.unpack(row[0], "the state row"))["decisions"])
    firsts, seconds = [], []
    for i in range(reps):
        copy = workdir / f"resume-{i}"
        _copy(run, copy)
        first = _resume(copy / db.name, copy / data.name, activation["agent_id"], decisions)
        second = _resume(
            copy / db.name, copy / data.name, activation["agent_id"], first["decisions"]
        )
        firsts.append(first)
        seconds.append(second)
        shutil.rmtree(copy, ignore_errors=True)

    def summary(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            k: median(float(r[k]) for r in rs)
            for k in ("resume_ms", "open_ms", "run_ms", "load_ms", "cpu_ms", "process_ms")
        } | {"resume_ms_range": [min(r["resume_ms"] for r in rs), max(r["resume_ms"] for r in rs)]}

    db_bytes = sum(p.stat().st_size for p in run.iterdir() if p.is_file())
    return {
        "steps": steps,
        "killed": killed,
        "steps_before_kill": activation["steps"],
        "activation_wall_s": activation["wall_s"],
        "activation_cpu_ms_per_step": activation["cpu_s"] * 1e3 / max(1, activation["steps"]),
        "db_bytes": db_bytes,
        "reps": reps,
        "first": summary(firsts),
        "second": summary(seconds),
        "runs": [{"first": a, "second": b} for a, b in zip(firsts, seconds, strict=True)],
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.longrun", description=__doc__)
    p.add_argument("--child", nargs=4, metavar=("DB", "DATA", "WORKDIR", "STEPS"))
    p.add_argument("--kill", action="store_true")
    p.add_argument("--end", action="store_true", help="let the activation end (no kill)")
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--reps", type=int, default=REPS)
    args = p.parse_args(argv)
    if args.child:
        db, data, workdir, steps = args.child
        child(Path(db), Path(data), Path(workdir), int(steps), kill=args.kill)
        return 0
    import tempfile

    with tempfile.TemporaryDirectory(dir=Path(__file__).parent, prefix=".longrun-") as tmp:
        out = measure(Path(tmp), args.steps, args.reps, kill=not args.end)
    out.pop("runs")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
