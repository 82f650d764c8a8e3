"""PostgreSQL beside SQLite: one agent's steps, workers on one store, agents in flight.

``python -m bench.postgres`` prints three tables (docs/scaling.md quotes them):

* **one agent** (W1: scripted model, 1,000 steps, in this process) on SQLite
  and on PostgreSQL, the median of three runs: what a step costs each store;
* **worker processes** (1, 2 and 4 ``stead work`` processes on one PostgreSQL
  store, 48 agents of 60 scripted steps): steps per second in all, and against
  one process;
* **agents in flight** (one ``stead work`` process, agents whose model answers
  over HTTP after 1 s, at several ``--concurrency``): steps per second and the
  worker's memory, which show what the threaded worker holds in flight.

PostgreSQL is the machine's (``STEAD_TEST_POSTGRES_URL``, a fresh schema per
run, dropped afterwards).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from stead import Runtime

from . import workload
from .fake_model import FakeModelServer
from .steps import measure

SERVER = os.environ.get("STEAD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REPO = Path(__file__).resolve().parents[1]


class Schema:
    """A fresh schema's store URL, dropped on exit."""

    def __enter__(self) -> str:
        self.name = f"stead_bench_{secrets.token_hex(5)}"
        sep = "&" if "?" in SERVER else "?"
        return f"{SERVER}{sep}schema={self.name}"

    def __exit__(self, *exc: Any) -> None:
        with psycopg.connect(SERVER, autocommit=True) as db:
            db.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.name))
            )


def one_agent(steps: int = 1000, runs: int = 3) -> dict[str, float]:
    """Median ms per step of W1 on each store."""
    out: dict[str, float] = {}
    for name in ("sqlite", "postgres"):
        found = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as d:
                if name == "sqlite":
                    found.append(measure(Path(d), steps)["ms_per_step"])
                else:
                    with Schema() as url:
                        found.append(_w1(Path(d), url, steps))
        out[name] = statistics.median(found)
    return out


def _w1(workdir: Path, url: str, steps: int) -> float:
    rt = Runtime(url, data_dir=workdir / "data")
    try:
        agent_id = rt.create(workload.spec(workdir)).agent_id
        t0 = time.perf_counter()
        rt.run(agent_id, model=workload.model(steps), tools=workload.tools(), max_steps=steps)
        return (time.perf_counter() - t0) * 1000 / steps
    finally:
        rt.close()


def _work(
    url: str, data: Path, procs: int, concurrency: int, make: Callable[[], list[str]], rt: Runtime
) -> tuple[float, list[int], list[str]]:
    """Start ``procs`` workers, let them settle, make the agents (the store tells the
    workers at once), and time until no agent has work left (each finished or ran
    out of script); the seconds, each worker's peak RSS (kB), the agents."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "stead", "work", "--forever", "--poll", "5",
            "--concurrency", str(concurrency), "--no-hibernate", "--store", url,
            "--data-dir", str(data)]  # fmt: skip
    workers = [subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for _ in range(procs)]  # fmt: skip
    peaks = [0] * procs
    try:
        time.sleep(2.0)  # started and listening: their start-up is not timed
        t0 = time.perf_counter()
        agents = make()
        while any(rt.store.load_state(a).status in ("created", "running") for a in agents):
            for i, w in enumerate(workers):
                peaks[i] = max(peaks[i], _rss_kb(w.pid))
            time.sleep(0.05)
        return time.perf_counter() - t0, peaks, agents
    finally:
        for w in workers:
            w.terminate()
            w.wait(timeout=60)


def _made(rt: Runtime, spec: Any, n: int) -> list[str]:
    return [rt.create(spec).agent_id for _ in range(n)]


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def worker_processes(agents: int = 48, steps: int = 60) -> dict[int, float]:
    """Steps per second in all with 1, 2 and 4 worker processes on one store."""
    out: dict[int, float] = {}
    for procs in (1, 2, 4):
        with tempfile.TemporaryDirectory() as d, Schema() as url:
            work = Path(d)
            rt = Runtime(url, data_dir=work / "data")
            spec = workload.spec(work, script_len=steps)
            make = functools.partial(_made, rt, spec, agents)
            wall, _, ids = _work(url, work / "data", procs, 8, make, rt)
            made = sum(rt.store.load_state(a).steps_completed for a in ids)
            rt.close()
            out[procs] = made / wall
    return out


def in_flight(concurrencies: tuple[int, ...] = (32, 128, 256), steps: int = 3
              ) -> dict[int, tuple[float, int]]:  # fmt: skip
    """With a model that answers after 1 s: steps/s and peak RSS (kB) of one worker
    running as many agents as its concurrency."""
    out: dict[int, tuple[float, int]] = {}
    with FakeModelServer(latency=1.0) as model_url:
        for conc in concurrencies:
            with tempfile.TemporaryDirectory() as d, Schema() as url:
                work = Path(d)
                rt = Runtime(url, data_dir=work / "data")
                provider = {"provider": "openai", "name": "bench", "base_url": model_url}
                data = dataclasses.replace(workload.spec(work, model=provider), max_steps=steps)
                make = functools.partial(_made, rt, data, conc)
                wall, peaks, ids = _work(url, work / "data", 1, conc, make, rt)
                made = sum(rt.store.load_state(a).steps_completed for a in ids)
                rt.close()
                out[conc] = (made / wall, peaks[0])
    return out


def main() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    w1 = one_agent()
    print("| store | W1 ms per step (median of 3) |\n|---|---|")
    for name, ms in w1.items():
        print(f"| {name} | {ms:.3f} |")
    procs = worker_processes()
    print("\n| worker processes | steps/s in all | against one |\n|---|---|---|")
    for n, rate in procs.items():
        print(f"| {n} | {rate:.0f} | {rate / procs[1]:.2f}x |")
    flight = in_flight()
    print("\n| agents in flight (one worker, model latency 1 s) | steps/s | peak RSS | "
          "RSS per agent |\n|---|---|---|---|")  # fmt: skip
    for conc, (rate, rss) in flight.items():
        print(f"| {conc} | {rate:.1f} | {rss / 1024:.0f} MiB | {rss / conc:.0f} kB |")


if __name__ == "__main__":
    main()
