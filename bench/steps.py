"""Durable steps per second for one agent.

One agent runs ``steps`` decisions in one activation (``Runtime.run`` with
``max_steps``); each decision calls :func:`bench.workload.lookup` and writes
memory.

Each step's time is split, by wrapping the store's ``commit``, ``append`` and
``_write`` and (on SQLite) its connection's ``execute`` on the instance, never
in the source:

* ``COMMIT`` statements, where SQLite writes the WAL and fsyncs it: the part
  the floor measures;
* the other SQL of a commit (``BEGIN IMMEDIATE``, the checks, the event
  INSERT, the state UPDATE);
* Python inside ``_write`` (serialising the materialised state, building rows,
  the lock);
* Python inside ``commit``/``append`` but outside ``_write`` (checking the
  batch; for ``commit``, also sealing and folding the events);
* everything outside the store: rendering the context, the model, the tool,
  sealing and folding events as they are emitted, the workspace scan, ids.

The wrappers add two clock reads per call, a few microseconds per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stead import Event, Kind, Runtime
from stead.canonical import dumps

from . import workload
from .stats import median, pct


class _Timed:
    """Wraps a store method on the instance and adds up the time spent in it."""

    def __init__(self, obj: Any, name: str) -> None:
        self.total = 0.0
        self.calls = 0
        inner: Callable[..., Any] = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.total += time.perf_counter() - t0
                self.calls += 1

        setattr(obj, name, timed)


class _TimedConnection:
    """Stands in for a ``sqlite3.Connection``; adds up time per statement verb."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.totals: dict[str, float] = {}

    def execute(self, sql: str, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._db.execute(sql, *args)
        finally:
            verb = sql.split(None, 1)[0].upper()
            self.totals[verb] = self.totals.get(verb, 0.0) + time.perf_counter() - t0

    def executemany(self, sql: str, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._db.executemany(sql, *args)
        finally:
            self.totals["INSERT"] = self.totals.get("INSERT", 0.0) + time.perf_counter() - t0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def measure(
    workdir: Path,
    steps: int,
    backend: str = "sqlite",
    output_bytes: int = workload.OUTPUT_BYTES,
    profiler: Any = None,
    model_url: str | None = None,
    store_url: str | None = None,
) -> dict[str, Any]:
    """Run one agent for ``steps`` steps in a fresh store; time it.

    The agent's spec stores a one-decision script; the ``steps``-decision model
    is passed to ``Runtime.run`` (parsing a long script from YAML is not part of
    running an agent). ``output_bytes`` sizes each tool result. ``profiler`` (a
    ``cProfile.Profile``) is enabled around the run only. With ``model_url``, the
    agent's model is instead ``provider: openai`` at that URL (see
    :mod:`bench.fake_model`), shown the conversation as a real model would be.
    ``store_url`` (a ``postgresql://`` URL) is the store instead of ``backend``'s.
    """
    url = f"sqlite:///{workdir / 'steps.db'}" if backend == "sqlite" else "memory:"
    if store_url is not None:
        url, backend = store_url, "postgresql"
    rt = Runtime(url, data_dir=workdir / "data")
    try:
        provider = None
        if model_url is not None:
            provider = {"provider": "openai", "name": "bench", "base_url": model_url}
        agent_id = rt.create(workload.spec(workdir, model=provider)).agent_id
        model = workload.model(steps) if model_url is None else None
        commit = _Timed(rt.store, "commit")
        append = _Timed(rt.store, "append")
        write = _Timed(rt.store, "_write")
        conn = None
        if backend == "sqlite":
            conn = _TimedConnection(rt.store._db)  # type: ignore[attr-defined]
            rt.store._db = conn  # type: ignore[attr-defined]
        # (when, how many steps the commit ends, how many events it holds)
        marks: list[tuple[float, int, int]] = []

        def on_commit(events: Sequence[Event]) -> None:
            ends = sum(1 for e in events if e.kind == Kind.STEP_COMPLETED)
            marks.append((time.perf_counter(), ends, len(events)))

        if profiler is not None:
            profiler.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = rt.run(
            agent_id,
            model=model,
            tools=workload.tools(output_bytes),
            max_steps=steps,
            on_commit=on_commit,
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if profiler is not None:
            profiler.disable()
    finally:
        rt.close()
    if outcome.steps != steps or outcome.state.steps_completed != steps:
        raise RuntimeError(
            f"the bench agent made {outcome.steps} of {steps} steps "
            f"(status {outcome.state.status}: {outcome.state.status_reason})"
        )
    # A step's time runs from the commit that ends the step before it (or the
    # activation's first commit) to the commit that ends it.
    start = marks[0][0]
    ends = [t for t, n, _ in marks if n]
    if sum(n for _, n, _ in marks) != steps or len(ends) != steps:
        raise RuntimeError("expected every step to end in a commit of its own")
    step_ms = [(b - a) * 1e3 for a, b in zip([start, *ends[:-1]], ends, strict=True)]
    step_commits = len(marks) - 1
    sql = dict(conn.totals) if conn is not None else {}
    commit_sql = sql.get("COMMIT", 0.0)
    other_sql = sum(sql.values()) - commit_sql

    def per_step(seconds: float) -> float:
        return seconds * 1e3 / steps

    step_events = sum(n for _, _, n in marks[1:])
    return {
        "backend": backend,
        "output_bytes": output_bytes,
        "steps": steps,
        "wall_s": wall,
        "steps_per_s": steps / wall,
        "ms_per_step": median(step_ms),
        "p90_ms_per_step": pct(step_ms, 90),
        "p99_ms_per_step": pct(step_ms, 99),
        "commits_per_step": step_commits / steps,
        "events_per_step": step_events / steps,
        # the materialised state every commit re-serialises and rewrites, at the end
        "state_bytes": len(dumps(outcome.state.to_json()).encode()),
        # per step, averaged over the whole run (so including the activation's start and end)
        "wall_ms_per_step": per_step(wall),
        # this process's processor time (every thread) over the run: the model, when
        # over HTTP, answers from a process of its own and is not counted
        "cpu_ms_per_step": per_step(cpu),
        "commit_ms_per_step": per_step(commit.total + append.total),
        "write_ms_per_step": per_step(write.total),
        "sql_commit_ms_per_step": per_step(commit_sql),
        "sql_other_ms_per_step": per_step(other_sql),
        "write_python_ms_per_step": per_step(write.total - commit_sql - other_sql),
        "store_other_ms_per_step": per_step(commit.total + append.total - write.total),
        "other_ms_per_step": per_step(wall - commit.total - append.total),
    }


def measure_http(workdir: Path, steps: int) -> dict[str, Any]:
    """W1 with the model over HTTP (the OpenAI wire format, a zero-latency local server)."""
    from .fake_model import FakeModelServer

    with FakeModelServer() as url:
        return measure(workdir, steps, "sqlite", model_url=url)


def profile(workdir: Path, steps: int, out: Path) -> None:
    """Run the SQLite workload once under cProfile; write the top functions to ``out``."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    measure(workdir, steps, "sqlite", profiler=prof)
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.strip_dirs()
    buf.write(f"cProfile of Runtime.run, {steps} steps on SQLite (python -m bench --profile)\n")
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)
    out.write_text(buf.getvalue(), encoding="utf-8")
