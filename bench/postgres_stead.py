"""stead's side of the PostgreSQL comparison: W1, W2, W3, W5 and agents in flight.

Every measurement runs in a schema of its own on the server (``Server``), made
for it and dropped afterwards; a W3 history's schema lives until the section
ends. The workloads are the SQLite ones (:mod:`bench.steps`, :mod:`bench.many`,
:mod:`bench.resume`, :mod:`bench.crash_stead`) given a ``postgresql://`` store
URL. The in-flight workload runs one ``stead work`` process whose agents ask
the fake model service (:mod:`bench.fake_model`) over HTTP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import resource
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from stead import Runtime

from . import crash_stead, many, resume, steps, workload
from .cpu import process_cpu_s
from .postgres import _rss_kb
from .stats import median, pct
from .systems import Hist, System
from .workload import REPO_ROOT

THREADS = 16
"""The parked worker's threads: activations run on them between model answers."""


class Server:
    """The PostgreSQL server the section measures on, and the schemas made on it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[str] = []

    def check(self) -> str | None:
        """Why the server cannot be used, or None."""
        try:
            with psycopg.connect(self.url, connect_timeout=5) as db:
                db.execute("SELECT 1")
        except psycopg.Error as e:
            return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None

    def make(self) -> str:
        name = f"bench_{secrets.token_hex(5)}"
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        self.made.append(name)
        return name

    def drop(self, name: str) -> None:
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        if name in self.made:
            self.made.remove(name)

    def drop_all(self) -> None:
        for name in list(self.made):
            self.drop(name)

    @contextlib.contextmanager
    def schema(self) -> Iterator[str]:
        name = self.make()
        try:
            yield name
        finally:
            self.drop(name)

    def store_url(self, schema: str) -> str:
        sep = "&" if "?" in self.url else "?"
        return f"{self.url}{sep}schema={schema}"

    def schema_bytes(self, schema: str) -> int:
        with psycopg.connect(self.url) as db:
            row = db.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r'",
                (schema,),
            ).fetchone()
        return int(row[0]) if row else 0

    def states(self, schema: str) -> dict[str, dict[str, Any]]:
        with psycopg.connect(self.url) as db:
            q = sql.SQL("SELECT agent_id, state FROM {}.agents").format(sql.Identifier(schema))
            return {a: json.loads(s) for a, s in db.execute(q).fetchall()}

    def busy(self, schema: str) -> int:
        """Agents that still have work: not yet run, or running."""
        with psycopg.connect(self.url) as db:
            q = sql.SQL(
                "SELECT count(*) FROM {}.agents WHERE status IN ('created', 'running')"
            ).format(sql.Identifier(schema))
            row = db.execute(q).fetchone()
        return int(row[0]) if row else 0


def store_settings(rt: Runtime) -> dict[str, Any]:
    """The server's setting as a session of stead's own pool sees it."""
    got: dict[str, Any] = {}
    with rt.store._pool.connection() as conn:  # type: ignore[attr-defined]
        for name in ("synchronous_commit", "fsync", "wal_sync_method", "server_version"):
            got[name] = conn.execute(f"SHOW {name}").fetchone()[0]
    return got


class SteadPg(System):
    name = "stead"
    label = "stead"

    def __init__(self, server: Server) -> None:
        self.server = server
        self.w5 = self._w5

    def info(self, workdir: Path) -> dict[str, Any]:
        with self.server.schema() as schema:
            rt = Runtime(self.server.store_url(schema), data_dir=workdir / "data")
            try:
                used = store_settings(rt)
            finally:
                rt.close()
        return {"system": "stead", "default": used, "used": used}

    def w1(self, workdir: Path, n: int) -> dict[str, Any]:
        with self.server.schema() as schema:
            return steps.measure(workdir, n, store_url=self.server.store_url(schema))

    def w2(self, workdir: Path, agents: int, n: int) -> dict[str, Any]:
        with self.server.schema() as schema:
            return many.worker(workdir, agents, n, url=self.server.store_url(schema))

    def build_history(self, workdir: Path, n: int) -> Hist:
        schema = self.server.make()
        events = 2 + n * len(workload.STEP_KINDS)
        h = resume.build(workdir, events, url=self.server.store_url(schema))
        h.db_bytes = self.server.schema_bytes(schema)
        return Hist("stead", h.decisions, h.build_s, h.db_bytes, h, {"events": events})

    def resume(self, hist: Hist) -> dict[str, Any]:
        out = resume.resume_once(hist.handle)
        hist.steps = hist.handle.decisions
        return out

    def _w5(self, workdir: Path, agents: int) -> dict[str, Any]:
        with self.server.schema() as schema:
            return crash_stead.measure(
                workdir,
                agents,
                url=self.server.store_url(schema),
                states=lambda: self.server.states(schema),
                # a worker on PostgreSQL that finds every agent leased waits for
                # work instead of leaving at once
                extra=["--forever"],
            )

    def in_flight(
        self, workdir: Path, model_url: str, agents: int, n: int, latency: float
    ) -> dict[str, Any]:
        """One ``stead work --in-flight agents`` process, each agent making ``n`` steps
        whose model answers after ``latency``."""
        with self.server.schema() as schema:
            return _in_flight(self.server, schema, workdir, model_url, agents, n, latency)


def _in_flight(
    server: Server,
    schema: str,
    workdir: Path,
    model_url: str,
    agents: int,
    n: int,
    latency: float,
) -> dict[str, Any]:
    url = server.store_url(schema)
    data = workdir / "data"
    rt = Runtime(url, data_dir=data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    argv = [sys.executable, "-m", "stead", "work", "--forever", "--poll", "5",
            "--in-flight", str(agents), "--concurrency", str(THREADS), "--no-hibernate",
            "--store", url, "--data-dir", str(data)]  # fmt: skip
    # the worker holds a socket to the model per agent in flight, and inherits the limit
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    proc = subprocess.Popen(
        argv, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(3.0)  # started, migrated and listening: not timed
        base = peak = _rss_kb(proc.pid)
        provider = {"provider": "openai", "name": "bench", "base_url": model_url}
        spec = dataclasses.replace(workload.spec(workdir, model=provider), max_steps=n)
        t0, c0 = time.perf_counter(), process_cpu_s(proc.pid)
        ids = [rt.create(spec).agent_id for _ in range(agents)]
        while server.busy(schema):
            if proc.poll() is not None:
                raise RuntimeError(f"the worker exited ({proc.returncode})")
            peak = max(peak, _rss_kb(proc.pid))
            time.sleep(0.1)
        # the worker's processor time (the agents are created from this process, not it)
        wall, cpu = time.perf_counter() - t0, process_cpu_s(proc.pid) - c0
        settings = store_settings(rt)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    try:
        made, added = 0, []
        for agent_id in ids:
            made += rt.store.load_state(agent_id).steps_completed
            at = [e.at for e in rt.store.read_events_of_kinds(agent_id, ["decision"])]
            added += [(b - a - latency) * 1e3 for a, b in itertools.pairwise(at)]
    finally:
        rt.close()
    return {
        "agents": agents,
        "steps_per_agent": n,
        "steps": made,
        "wall_s": wall,
        "steps_per_s": made / wall,
        "cpu_s": cpu,
        "cpu_ms_per_step": cpu * 1e3 / max(made, 1),
        "latency_s": latency,
        "added_ms_p50": median(added),
        "added_ms_p99": pct(added, 99),
        "added_ms_max": max(added) if added else float("nan"),
        "rss_base_kb": base,
        "rss_peak_kb": peak,
        "kb_per_agent": (peak - base) / agents,
        "how": f"one `stead work --in-flight {agents} --concurrency {THREADS}` process "
        "(activations parked while their model answers)",
        **settings,
    }
