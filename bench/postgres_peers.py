"""The PostgreSQL section of ``python -m bench``: stead, LangGraph and DBOS on one server.

The same workloads as the SQLite comparison, with every system on the same
PostgreSQL (``--postgres-url``, or ``STEAD_TEST_POSTGRES_URL``) at the
server's ``synchronous_commit`` (``on``, read back from a live session of
each): W1, W2, W3, W5 (stead only, as on SQLite) and the floor (one durable
``INSERT`` in its own transaction), then the in-flight workload (agents whose
model answers after 1 s). Systems take turns within each round, the order
reversed every other round, as in the SQLite section. Every measurement makes
its own schema and drops it; whatever is left is dropped at the end. If the
server cannot be reached the section says so and is skipped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from . import comparison, report
from .fake_model import FakeModelServer
from .postgres_stead import Server, SteadPg
from .stats import median, pct
from .systems import PEERS_PYTHON, Hist, Peer, PeerError, System

DEFAULT_URL = os.environ.get("STEAD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


class PgPeer(Peer):
    """A peer on PostgreSQL: every call names the server and a schema made for it."""

    server: Server

    def __init__(self, server: Server, python: Path = PEERS_PYTHON, max_history: int | None = None):
        super().__init__(python, max_history)
        self.server = server

    def _in_schema(self, command: str, workdir: Path, **opts: Any) -> dict[str, Any]:
        with self.server.schema() as schema:
            return self.call(command, workdir, url=self.server.url, schema=schema, **opts)

    def info(self, workdir: Path) -> dict[str, Any]:
        return self._in_schema("info", workdir)

    def w1(self, workdir: Path, n: int) -> dict[str, Any]:
        return self._in_schema("w1", workdir, steps=n)

    def w2(self, workdir: Path, agents: int, n: int) -> dict[str, Any]:
        return self._in_schema("w2", workdir, agents=agents, steps=n)

    def build_history(self, workdir: Path, n: int) -> Hist:
        schema = self.server.make()
        out = self.call("w3-build", workdir, steps=n, url=self.server.url, schema=schema)
        if out["steps"] != n:
            raise PeerError(f"{self.name} built {out['steps']} steps, wanted {n}")
        return Hist(self.name, n, out["build_s"], out["db_bytes"], (workdir, schema), out)

    def resume(self, hist: Hist) -> dict[str, Any]:
        workdir, schema = hist.handle
        out = self.call("w3-resume", workdir, steps=hist.steps, url=self.server.url, schema=schema)
        hist.steps = out["steps_after"]
        return out

    def in_flight(
        self, workdir: Path, model_url: str, agents: int, n: int, latency: float
    ) -> dict[str, Any]:
        opts = {"model-url": model_url, "latency": latency}
        return self._in_schema("inflight", workdir, agents=agents, steps=n, **opts)


class LangGraphPg(PgPeer):
    name = "langgraph"
    label = "LangGraph"
    module = "langgraph_pg"


class DbosPg(PgPeer):
    name = "dbos"
    label = "DBOS"
    module = "dbos_pg"


PG_PEERS: dict[str, type[PgPeer]] = {"langgraph": LangGraphPg, "dbos": DbosPg}


def floor(server: Server, commits: int) -> dict[str, Any]:
    """One durable commit on this server: an ``INSERT`` of 200 bytes, autocommitted."""
    with server.schema() as schema, psycopg.connect(server.url, autocommit=True) as db:
        db.execute(f'CREATE TABLE "{schema}".floor (id bigserial PRIMARY KEY, body text)')
        insert = f'INSERT INTO "{schema}".floor (body) VALUES (%s)'
        body = "x" * 200
        for _ in range(10):
            db.execute(insert, (body,))
        times = []
        for _ in range(commits):
            t0 = time.perf_counter()
            db.execute(insert, (body,))
            times.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": median(times), "p90_ms": pct(times, 90), "p99_ms": pct(times, 99)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("PostgreSQL section")
    g.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL section")
    g.add_argument(
        "--postgres-url",
        default=DEFAULT_URL,
        help="the server (STEAD_TEST_POSTGRES_URL; postgresql://postgres@127.0.0.1:5432/test)",
    )
    g.add_argument("--pg-rounds", type=int, default=3, help="rounds of W1 on PostgreSQL (3)")
    g.add_argument("--pg-agents", type=int, default=200, help="W2 on PostgreSQL: agents (200)")
    g.add_argument(
        "--pg-sizes",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[10, 1_000, 10_000],
        help="W3 on PostgreSQL: history lengths in steps (10,1000,10000)",
    )
    g.add_argument(
        "--inflight-agents", type=int, default=1000, help="agents in flight, every system (1000)"
    )
    g.add_argument(
        "--inflight-steps", type=int, default=3, help="steps of each agent in flight (3)"
    )
    g.add_argument(
        "--inflight-latency", type=float, default=1.0, help="the model's latency, s (1.0)"
    )
    g.add_argument("--inflight-rounds", type=int, default=1, help="rounds in flight (1)")


def quick(args: argparse.Namespace) -> None:
    args.pg_rounds, args.pg_agents, args.pg_sizes = 1, 20, [10, 1_000]
    args.inflight_agents = min(args.inflight_agents, 100)


Attempt = Callable[[System, str, Callable[[], Any]], Any]
Builder = Callable[[argparse.Namespace, Path, list[System], Attempt], dict[str, dict[int, Hist]]]


def run(args: argparse.Namespace, work: Path, build_histories: Builder) -> dict[str, Any]:
    say = report.progress
    server = Server(args.postgres_url)
    where = server.url.split("@")[-1]
    reason = server.check()
    if reason is not None:
        bar = "!" * 72
        say(f"{bar}\nPostgreSQL section SKIPPED: cannot reach {where}: {reason}\n{bar}")
        return {"skipped": f"cannot reach {where}: {reason}"}
    say(f"PostgreSQL section on {where}")
    work = work / "postgres"
    work.mkdir()
    try:
        return _run(args, work, server, build_histories)
    finally:
        server.drop_all()


def _run(
    args: argparse.Namespace, work: Path, server: Server, build_histories: Builder
) -> dict[str, Any]:
    say = report.progress
    counter = iter(range(1_000_000))

    def once(fn: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        d = work / f"run-{next(counter)}"
        d.mkdir()
        try:
            return fn(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    stead = SteadPg(server)
    systems: list[System] = [stead]
    systems += [
        PG_PEERS[n](server, args.peers_python, args.peer_max_history)
        for n in args.systems
        if n != "stead"
    ]
    errors: list[dict[str, str]] = []
    broken: set[tuple[str, str]] = set()

    def attempt(system: System, what: str, fn: Callable[[], Any]) -> Any:
        """A failure on PostgreSQL is recorded, never a crash; that system skips the rest
        of that workload (of every workload if it failed to start at all)."""
        workload = what.split()[0]
        if (system.name, workload) in broken or (system.name, "info") in broken:
            return None
        try:
            return fn()
        except Exception as e:  # any system's failure, stead's too
            say(f"error (PostgreSQL, {system.label} {what}): {e}")
            errors.append({"system": system.name, "workload": what, "error": str(e)})
            broken.add((system.name, workload))
            return None

    infos: dict[str, Any] = {}
    for s in systems:
        got = attempt(s, "info", lambda s=s: once(s.info))
        if got is not None:
            infos[s.name] = got
            say(f"{s.label} on PostgreSQL: {got.get('versions', 'this tree')}; {got['used']}")

    histories = build_histories(argparse.Namespace(sizes=args.pg_sizes), work, systems, attempt)

    floors: list[dict[str, Any]] = []
    w1: dict[str, list[dict[str, Any]]] = {s.name: [] for s in systems}
    for r in range(args.pg_rounds):
        for s in systems if r % 2 == 0 else systems[::-1]:
            if s is stead:
                floors.append(floor(server, args.floor_commits))
            got = attempt(s, "w1", lambda s=s: once(lambda d: s.w1(d, args.steps)))
            if got is not None:
                w1[s.name].append(got)
        say(
            f"PostgreSQL round {r + 1}/{args.pg_rounds}: floor {floors[-1]['median_ms']:.3f} ms; "
            "W1 "
            + ", ".join(
                f"{s.label} {w1[s.name][-1]['steps_per_s']:.0f}"
                for s in systems
                if len(w1[s.name]) == r + 1
            )
            + " steps/s"
        )

    w2: dict[str, list[dict[str, Any]]] = {s.name: [] for s in systems}
    for r in range(args.w2_rounds):
        for s in systems if r % 2 == 0 else systems[::-1]:
            got = attempt(
                s, "w2", lambda s=s: once(lambda d: s.w2(d, args.pg_agents, args.agent_steps))
            )
            if got is not None:
                w2[s.name].append(got)
        say(
            f"PostgreSQL W2 round {r + 1}/{args.w2_rounds}: "
            + ", ".join(
                f"{s.label} {w2[s.name][-1]['steps_per_s']:.0f}"
                for s in systems
                if len(w2[s.name]) == r + 1
            )
            + " steps/s"
        )

    resumes: dict[str, dict[int, list[dict[str, Any]]]] = {
        name: {size: [] for size in hs} for name, hs in histories.items()
    }
    for rep in range(args.resume_reps):
        for size in args.pg_sizes:
            for s in systems if rep % 2 == 0 else systems[::-1]:
                h = histories.get(s.name, {}).get(size)
                if h is not None:
                    got = attempt(s, f"w3 {size}", lambda s=s, h=h: s.resume(h))
                    if got is not None:
                        resumes[s.name][size].append(got)
        say(f"PostgreSQL resume {rep + 1}/{args.resume_reps}")

    w5: dict[str, Any] = {}
    got = attempt(stead, "w5", lambda: once(lambda d: stead._w5(d, args.crash_agents)))
    if got is not None:
        w5["stead"] = got
        say(f"PostgreSQL W5: {got['recovery_s']:.2f} s")

    flight = in_flight(args, systems, once, attempt)

    fl = {
        "median_ms": median(f["median_ms"] for f in floors),
        "p90_ms": median(f["p90_ms"] for f in floors),
        "p99_ms": median(f["p99_ms"] for f in floors),
        "rounds": floors,
    }
    out = comparison.summarise(systems, infos, w1, {}, {}, w2, histories, resumes, w5, fl, errors)
    out.update(server=server.url.split("@")[-1], floor=fl, in_flight=flight, skipped=None)
    return out


def in_flight(
    args: argparse.Namespace,
    systems: list[System],
    once: Callable[[Callable[[Path], dict[str, Any]]], dict[str, Any]],
    attempt: Attempt,
) -> dict[str, Any]:
    """Each system's agents in flight, with one model service for all of them."""
    say = report.progress
    runs: dict[str, list[dict[str, Any]]] = {s.name: [] for s in systems}
    n, agents, latency = args.inflight_steps, args.inflight_agents, args.inflight_latency
    with FakeModelServer(latency=latency) as model_url:
        for r in range(args.inflight_rounds):
            for s in systems if r % 2 == 0 else systems[::-1]:
                fn = s.in_flight  # type: ignore[attr-defined]
                got = attempt(
                    s,
                    f"in flight ({agents:,} agents)",
                    lambda fn=fn: once(lambda d: fn(d, model_url, agents, n, latency)),
                )
                if got is not None:
                    runs[s.name].append(got)
                    say(
                        f"in flight, {s.label}: {agents:,} agents, {got['steps_per_s']:.1f} "
                        f"steps/s, p99 +{got['added_ms_p99']:.0f} ms, "
                        f"{got['kb_per_agent']:.0f} kB per agent"
                    )
    keys = (
        "steps_per_s",
        "added_ms_p50",
        "added_ms_p99",
        "kb_per_agent",
        "wall_s",
        "cpu_ms_per_step",
    )
    out: dict[str, Any] = {}
    for name, rs in runs.items():
        if rs:
            summary: dict[str, Any] = {
                k: median(float(x[k]) for x in rs) for k in keys if all(k in x for x in rs)
            }
            summary.update(
                agents=rs[0]["agents"],
                steps_per_agent=rs[0]["steps_per_agent"],
                how=rs[0]["how"],
                rounds=rs,
            )
            out[name] = summary
    return out


def main(argv: list[str]) -> int:
    """``python -m bench.postgres_peers``: agents in flight only, every system, as JSON."""
    import json
    import sys
    import tempfile

    p = argparse.ArgumentParser(prog="python -m bench.postgres_peers", description=main.__doc__)
    p.add_argument("--systems", type=lambda s: s.split(","), default=["stead", *PG_PEERS])
    p.add_argument("--peers-python", type=Path, default=PEERS_PYTHON)
    add_arguments(p)
    args = p.parse_args(argv)
    args.peer_max_history = None
    server = Server(args.postgres_url)
    reason = server.check()
    if reason is not None:
        print(f"PostgreSQL cannot be reached: {reason}", file=sys.stderr)
        return 2
    systems: list[System] = [
        SteadPg(server) if n == "stead" else PG_PEERS[n](server, args.peers_python)
        for n in args.systems
    ]
    errors: list[str] = []

    def attempt(system: System, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as e:  # reported, and the next system measured
            report.progress(f"error: {system.label} {what}: {e}")
            errors.append(f"{system.label} {what}: {e}")
            return None

    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
        counter = iter(range(1_000_000))

        def once(fn: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
            d = Path(tmp) / f"run-{next(counter)}"
            d.mkdir()
            return fn(d)

        try:
            out = in_flight(args, systems, once, attempt)
        finally:
            server.drop_all()
    print(json.dumps({"in_flight": out, "errors": errors}, indent=2))
    return 1 if errors else 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
