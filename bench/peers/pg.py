"""What the peers share on PostgreSQL: the server's setting, sizes, and the in-flight agent.

The harness makes a fresh schema for every measurement and drops it after
(:mod:`bench.postgres_peers`); a peer is told the server's URL (``--url``) and
the schema (``--schema``) and keeps every table it makes in it.

The in-flight workload: ``--agents`` agents at once, each making ``--steps``
steps whose model is the fake model service (:mod:`bench.fake_model`,
``--model-url``), which answers after its latency (1 s). What is reported is
what stead's in-flight table reports: steps per second in all, the time a
runtime adds to a step beyond the model's latency, and memory per agent in
flight. This module must not import stead: it runs in ``.venv-peers``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import resource
import time
from pathlib import Path
from typing import Any

import psycopg

from ..stats import median, pct
from .common import cpu_fields, decision_data, run_tool

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Return a record for a key.",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "remember",
            "description": "Write values to memory.",
            "parameters": {"type": "object", "properties": {"values": {"type": "object"}}},
        },
    },
]


def with_schema(url: str, schema: str) -> str:
    """``url`` whose sessions put ``schema`` first on their search path."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


def server_settings(conn: Any) -> dict[str, Any]:
    """What a live session of the system runs with: the durability that counts."""
    got = {}
    for name in ("synchronous_commit", "fsync", "wal_sync_method", "server_version"):
        row = conn.execute(f"SHOW {name}").fetchone()
        got[name] = row[0] if isinstance(row, tuple) else next(iter(row.values()))
    return got


def schema_bytes(url: str, schema: str) -> int:
    """Bytes of every table, index and TOAST table in ``schema``."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def raise_open_files() -> None:
    """Ten thousand agents in flight hold ten thousand sockets to the model at once."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Model:
    """The agent's model over HTTP: the request a real agent would send, one per step.

    ``answers`` keeps, per agent, the time each answer arrived: the time between
    two answers less the model's latency is what the runtime added to the step
    (its tool call, its durable writes, sending the next request).
    """

    def __init__(self, url: str) -> None:
        import httpx

        # one connection per request, as the service closes each (HTTP/1.0); no cap,
        # since every agent in flight has its request open at once
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
        self.client = httpx.AsyncClient(base_url=url, limits=limits, timeout=600.0)
        self.answers: dict[str, list[float]] = {}

    async def decide(self, agent: str, step: int) -> dict[str, Any]:
        # the service picks decision ``step`` by the assistant turns the conversation holds
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "Look things up and remember the last one."}
        ]
        messages += [{"role": "assistant", "content": "ok"}] * step
        body = {"model": "bench", "messages": messages, "tools": TOOLS}
        resp = await self.client.post("/chat/completions", content=json.dumps(body))
        resp.raise_for_status()
        self.answers.setdefault(agent, []).append(time.perf_counter())
        calls = resp.json()["choices"][0]["message"]["tool_calls"]
        if (
            json.loads(calls[0]["function"]["arguments"])
            != decision_data(step)["actions"][0]["args"]
        ):
            raise RuntimeError(f"the model answered {calls} at step {step}")
        return decision_data(step)

    async def close(self) -> None:
        await self.client.aclose()


def act(decision: dict[str, Any]) -> dict[str, Any]:
    result, remember = run_tool(decision)
    return {"result": result, "memory": remember}


class RssPeak:
    """The process's resident set, sampled every 50 ms while agents are in flight."""

    def __init__(self) -> None:
        self.base = rss_kb()
        self.peak = self.base
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, rss_kb())
            await asyncio.sleep(0.05)

    def __enter__(self) -> RssPeak:
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._task is not None:
            self._task.cancel()
        self.peak = max(self.peak, rss_kb())


def in_flight_result(
    agents: int,
    steps: int,
    wall_s: float,
    latency_s: float,
    answers: dict[str, list[float]],
    rss: RssPeak,
    cpu_s: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Steps/s in all, added latency per step (p50, p99), memory per agent in flight."""
    if len(answers) != agents or any(len(a) != steps for a in answers.values()):
        raise RuntimeError(f"expected {agents} agents of {steps} model answers each")
    added = [
        (b - a - latency_s) * 1e3 for ts in answers.values() for a, b in itertools.pairwise(ts)
    ]
    return {
        **cpu_fields(cpu_s, agents * steps),
        "agents": agents,
        "steps_per_agent": steps,
        "steps": agents * steps,
        "wall_s": wall_s,
        "steps_per_s": agents * steps / wall_s,
        "latency_s": latency_s,
        "added_ms_p50": median(added),
        "added_ms_p99": pct(added, 99),
        "added_ms_max": max(added) if added else float("nan"),
        "rss_base_kb": rss.base,
        "rss_peak_kb": rss.peak,
        "kb_per_agent": (rss.peak - rss.base) / agents,
        **extra,
    }
