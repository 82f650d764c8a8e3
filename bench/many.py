"""Workload 2, stead's side: many agents driven by one process.

``measure(workdir, agents, steps)`` is the hook the comparison calls (see
:data:`MEASURE`). What it must do: in a fresh store under ``workdir``, create
``agents`` agents and have each make ``steps`` durable steps of the bench agent
(:mod:`bench.workload`), all from this one process, and return at least
``steps`` (the total), ``wall_s`` and ``steps_per_s``. The clock runs from
before the first agent is created to the last step's commit, as it does for the
peers (a LangGraph thread and a DBOS workflow are created by their first run).

The baseline below runs the agents one after another with ``Runtime.run``:
each activation takes its lease, makes its steps and releases it before the
next starts, so it measures the same per-step cost as workload 1 plus each
activation's fixed commits. A multi-agent worker (with group commit) replaces
it by pointing :data:`MEASURE` at its own function with the same signature.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stead import Runtime
from stead.workers.threaded import Worker

from . import workload


def sequential(workdir: Path, agents: int, steps: int) -> dict[str, Any]:
    """``agents`` agents, each run to ``steps`` steps by ``Runtime.run``, one after another."""
    rt = Runtime(f"sqlite:///{workdir / 'many.db'}", data_dir=workdir / "data")
    try:
        spec = workload.spec(workdir)
        tools = workload.tools()
        t0, c0 = time.perf_counter(), time.process_time()
        ids = [rt.create(spec).agent_id for _ in range(agents)]
        t1 = time.perf_counter()
        done = 0
        for agent_id in ids:
            outcome = rt.run(agent_id, model=workload.model(steps), tools=tools, max_steps=steps)
            if outcome.steps != steps:
                raise RuntimeError(
                    f"agent {agent_id} made {outcome.steps} of {steps} steps "
                    f"(status {outcome.state.status}: {outcome.state.status_reason})"
                )
            done += outcome.steps
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        run_s = time.perf_counter() - t1
    finally:
        rt.close()
    return {
        "agents": agents,
        "steps_per_agent": steps,
        "steps": done,
        "wall_s": wall,
        "steps_per_s": done / wall,
        "wall_ms_per_step": wall * 1e3 / done,
        "cpu_ms_per_step": cpu * 1e3 / done,
        "create_s": t1 - t0,
        "run_steps_per_s": done / run_s,
        "concurrency": "sequential (Runtime.run per agent)",
    }


def worker(
    workdir: Path, agents: int, steps: int, concurrency: int = 64, url: str | None = None
) -> dict[str, Any]:
    """``agents`` agents run by one :class:`~stead.workers.threaded.Worker` with group commit,
    on SQLite or on the store ``url``."""
    rt = Runtime(url or f"sqlite:///{workdir / 'many.db'}", data_dir=workdir / "data")
    try:
        spec = workload.spec(workdir, script_len=steps)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(agents):
            rt.create(spec)
        t1 = time.perf_counter()
        # a claiming store (PostgreSQL) hands a pass as many agents as run at once
        passes = 1 if url is None else 1_000
        report = Worker(rt, concurrency=concurrency, max_steps=steps).run_until_idle(passes)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        run_s = time.perf_counter() - t1
    finally:
        rt.close()
    if report.errors or report.steps != agents * steps:
        raise RuntimeError(
            f"worker made {report.steps} of {agents * steps} steps: "
            f"{list(report.errors.values())[:3]}"
        )
    return {
        "agents": agents,
        "steps_per_agent": steps,
        "steps": report.steps,
        "wall_s": wall,
        "steps_per_s": report.steps / wall,
        "wall_ms_per_step": wall * 1e3 / report.steps,
        "cpu_ms_per_step": cpu * 1e3 / report.steps,
        "create_s": t1 - t0,
        "run_steps_per_s": report.steps / run_s,
        "commits": report.commits,
        "batches_per_commit": report.batches / max(report.commits, 1),
        "concurrency": f"Worker, {concurrency} agents at once, group commit",
    }


MEASURE: Callable[[Path, int, int], dict[str, Any]] = worker
"""The W2 implementation the comparison runs; replace with a multi-agent worker's."""
