"""Agents in flight: one worker, a model that answers after a second, PostgreSQL.

``python -m bench.inflight [N ...]`` measures what one ``stead work`` process
does with N agents whose model (a fake of the OpenAI wire format on 127.0.0.1,
an asyncio server in a process of its own that holds every request for
``--latency`` seconds) keeps them waiting: the parked worker
(``--in-flight N``) at each N, and, as the baseline in the same run, the
threaded worker with one thread per agent (``--concurrency 256``) on 256
agents. Each agent makes ``--steps`` decisions (each a tool call and a memory
write) and then stops at its step limit. Reported:

* **steps/s**: decisions in all over the time from the first to the last;
* **added per step**: for each decision after an agent's first, the time since
  its previous decision less the model's own latency for it (from the
  journal's ``at`` and the attempt's ``latency_ms``): what the runtime adds to
  a step, median and p99;
* **peak RSS**, and the memory per agent in flight: the growth of peak RSS
  from the smallest N to each larger one, over the agents added.

docs/scaling.md quotes the table.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from stead import Runtime

from . import workload
from .fake_model import _answer
from .postgres import REPO, SERVER, Schema, _rss_kb


async def _serve(latency: float) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length))
                await asyncio.sleep(latency)  # a real model thinks before it answers
                payload = json.dumps(_answer(body)).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=16384)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


class AsyncModelServer:
    """``with AsyncModelServer(latency) as url:`` the fake model's base URL."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    def __enter__(self) -> str:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.inflight", "--serve", str(self.latency)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        return f"http://127.0.0.1:{int(self._proc.stdout.readline())}/v1"

    def __exit__(self, *exc: Any) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


@dataclasses.dataclass
class Row:
    worker: str
    agents: int
    steps_per_s: float
    added_ms_p50: float
    added_ms_p99: float
    peak_rss_kb: int
    seconds: float


def run(model_url: str, agents: int, steps: int, parked: bool, threads: int, procs: int = 1) -> Row:
    """Make ``agents`` agents, then run ``procs`` workers until none has work left."""
    with tempfile.TemporaryDirectory() as d, Schema() as url:
        work = Path(d)
        rt = Runtime(url, data_dir=work / "data")
        provider = {"provider": "openai", "name": "bench", "base_url": model_url}
        spec = dataclasses.replace(workload.spec(work, model=provider), max_steps=steps)
        for _ in range(agents):
            rt.create(spec)
        rt.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
        env["PYTHONPATH"] = str(REPO)
        share = -(-agents // procs)
        flight = ["--in-flight", str(share), "--concurrency", str(threads)]
        argv = [sys.executable, "-m", "stead", "work", "--no-hibernate", "--store", url,
                "--data-dir", str(work / "data"),
                *(flight if parked else ["--concurrency", str(agents)])]  # fmt: skip
        t0 = time.perf_counter()
        workers = [
            subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
            for _ in range(procs)
        ]
        peak = 0
        while any(w.poll() is None for w in workers):
            peak = max([peak, *(_rss_kb(w.pid) for w in workers)])
            time.sleep(0.1)
        seconds = time.perf_counter() - t0
        if any(w.returncode != 0 for w in workers):
            raise RuntimeError(f"a worker exited {[w.returncode for w in workers]}")
        kind = "parked" if parked else "threaded"
        return _row(kind if procs == 1 else f"{kind} x{procs}", url, agents, peak, seconds)


def _row(kind: str, url: str, agents: int, peak: int, seconds: float) -> Row:
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(SERVER) as db:
        rows = db.execute(
            f"SELECT agent_id, at, data FROM {schema}.events WHERE kind = 'decision' "
            "ORDER BY agent_id, seq"
        ).fetchall()
    added: list[float] = []
    last: dict[str, float] = {}
    for agent_id, at, data in rows:
        latency = sum(a.get("latency_ms", 0.0) for a in json.loads(data).get("attempts", []))
        if agent_id in last:
            added.append((at - last[agent_id]) * 1000 - latency)
        last[agent_id] = at
    ats = [r[1] for r in rows]
    span = max(ats) - min(ats) if ats else 0.0
    added.sort()
    p99 = added[min(len(added) - 1, int(len(added) * 0.99))] if added else 0.0
    return Row(kind, agents, len(rows) / span if span else 0.0,
               statistics.median(added) if added else 0.0, p99, peak, seconds)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.inflight", description=__doc__)
    p.add_argument("sizes", nargs="*", type=int, default=[1000, 10_000])
    p.add_argument("--steps", type=int, default=3, help="decisions per agent (3)")
    p.add_argument("--latency", type=float, default=1.0, help="the model's seconds (1)")
    p.add_argument("--threads", type=int, default=16, help="the parked worker's threads (16)")
    p.add_argument("--baseline", type=int, default=256, help="the threaded worker's agents")
    p.add_argument(
        "--two-processes",
        type=int,
        default=1000,
        metavar="N",
        help="then N agents on two parked workers beside one (1000; 0 skips)",
    )
    p.add_argument("--serve", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve is not None:
        asyncio.run(_serve(args.serve))
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    rows = []
    with AsyncModelServer(args.latency) as model_url:
        if args.baseline:
            rows.append(run(model_url, args.baseline, args.steps, False, args.baseline))
        for n in sorted(args.sizes):
            rows.append(run(model_url, n, args.steps, True, args.threads))
        if args.two_processes:
            for procs in (1, 2):
                rows.append(
                    run(model_url, args.two_processes, args.steps, True, args.threads, procs)
                )
    parked = [r for r in rows if r.worker == "parked"][: len(args.sizes)]
    print(f"model latency {args.latency} s, {args.steps} decisions per agent, PostgreSQL\n")
    print("| worker | agents | steps/s | added per step, median | p99 | peak RSS | "
          "per agent added |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for r in rows:
        per = ""
        if r.worker == "parked" and r is not parked[0]:
            per = (
                f"{(r.peak_rss_kb - parked[0].peak_rss_kb) / (r.agents - parked[0].agents):.0f} kB"
            )
        print(f"| {r.worker} | {r.agents} | {r.steps_per_s:.0f} | {r.added_ms_p50:.0f} ms | "
              f"{r.added_ms_p99:.0f} ms | {r.peak_rss_kb / 1024:.0f} MiB | {per} |")  # fmt: skip
    if args.two_processes:
        one, two = rows[-2], rows[-1]
        print(f"\ntwo parked workers against one ({one.agents} agents): "
              f"{two.steps_per_s / one.steps_per_s:.2f}x steps/s")  # fmt: skip
    print("\n" + json.dumps([dataclasses.asdict(r) for r in rows]))


if __name__ == "__main__":
    main()
