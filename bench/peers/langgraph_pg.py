"""LangGraph with ``PostgresSaver``: the graph of :mod:`bench.peers.langgraph_peer` on PostgreSQL.

The same two-node graph, invoked with ``durability="sync"``, checkpointed by
``langgraph-checkpoint-postgres`` in the run's own schema (``--schema``, on
the search path of every session). Its connections are made as
``PostgresSaver.from_conn_string`` makes them (``autocommit=True``,
``prepare_threshold=0``, ``dict_row``): each of the saver's writes is its own
transaction, committed with the server's ``synchronous_commit`` (``on``).

``inflight`` runs the async graph (``AsyncPostgresSaver`` over a psycopg
``AsyncConnectionPool``, ``ainvoke``): ``--agents`` threads at once whose
``model`` node asks the fake model service over HTTP.

Usage: python -m bench.peers.langgraph_pg {info,w1,w2,w3-build,w3-resume,inflight}
       --dir D --url U --schema S ...
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg import Connection
from psycopg.rows import dict_row

from .common import installed, main, many_result, steps_result, versions
from .langgraph_peer import CALLS, MARKS, AgentState, builder, config, route, run_agent, tool_node
from .pg import (
    Model,
    RssPeak,
    in_flight_result,
    raise_open_files,
    schema_bytes,
    server_settings,
    with_schema,
)

DISTS = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "psycopg")
CONN_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def connect(args: argparse.Namespace, synchronous_commit: str = "") -> Connection[Any]:
    conn: Connection[Any] = Connection.connect(
        with_schema(args.url, args.schema),
        **CONN_KWARGS,  # type: ignore[arg-type]
    )
    if synchronous_commit:
        conn.execute(f"SET synchronous_commit = {synchronous_commit}")
    return conn


def saver(conn: Connection[Any]) -> PostgresSaver:
    s = PostgresSaver(conn)
    s.setup()
    return s


def rows(conn: Connection[Any]) -> dict[str, int]:
    return {
        t: conn.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"]  # type: ignore[index]
        for t in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
    }


def cmd_info(args: argparse.Namespace) -> dict[str, Any]:
    with connect(args) as conn:
        saver(conn)
        used = server_settings(conn)
    return {
        "system": "langgraph",
        "versions": versions(*DISTS),
        "venv": installed(),
        "python": sys.version.split()[0],
        "default": {**used, "durability": "async"},
        "used": {**used, "durability": "sync"},
    }


def cmd_w1(args: argparse.Namespace) -> dict[str, Any]:
    with connect(args) as conn:
        graph = builder().compile(checkpointer=saver(conn))
        run_agent(graph, "warmup", 20, "sync")
        MARKS.times.clear()
        before = rows(conn)
        t0, c0 = time.perf_counter(), time.process_time()
        run_agent(graph, "agent-0", args.steps, "sync")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        after, used = rows(conn), server_settings(conn)
    return steps_result(
        args.steps,
        wall,
        MARKS,
        durability="sync",
        **used,
        **{f"{t}_per_step": (after[t] - before[t]) / args.steps for t in after},
        cpu_s=cpu,
    )


def cmd_w2(args: argparse.Namespace) -> dict[str, Any]:
    """``--agents`` threads of ``--steps`` steps each, one ``invoke`` after another."""
    with connect(args) as conn:
        graph = builder().compile(checkpointer=saver(conn))
        run_agent(graph, "warmup", 20, "sync")
        t0, c0 = time.perf_counter(), time.process_time()
        for a in range(args.agents):
            run_agent(graph, f"agent-{a}", args.steps, "sync")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        used = server_settings(conn)
    return many_result(
        args.agents,
        args.steps,
        wall,
        concurrency="sequential",
        durability="sync",
        **used,
        cpu_s=cpu,
    )


def cmd_w3_build(args: argparse.Namespace) -> dict[str, Any]:
    """A thread that has run ``--steps`` steps; built with ``synchronous_commit=off``
    (building is not measured, and the server stays up, so nothing is lost)."""
    t0 = time.perf_counter()
    with connect(args, synchronous_commit="off") as conn:
        run_agent(builder().compile(checkpointer=saver(conn)), "agent", args.steps, "sync")
        counts = rows(conn)
    return {
        "steps": args.steps,
        "build_s": time.perf_counter() - t0,
        "db_bytes": schema_bytes(args.url, args.schema),
        **counts,
    }


def cmd_w3_resume(args: argparse.Namespace) -> dict[str, Any]:
    """In this fresh process: connect, compile, invoke ONE more step on the thread."""
    done = args.steps
    g = builder()
    t0, c0 = time.perf_counter(), time.process_time()
    conn = connect(args)
    graph = g.compile(checkpointer=PostgresSaver(conn))
    t1 = time.perf_counter()
    out = graph.invoke({"limit": done + 1}, config("agent", 1), durability="sync")
    t2, c2 = time.perf_counter(), time.process_time()
    conn.close()
    if out["step"] != done + 1 or CALLS != {"model": 1, "tool": 1}:
        raise RuntimeError(f"resumed at step {out['step']} with calls {CALLS}, wanted {done + 1}")
    return {
        "resume_ms": (t2 - t0) * 1e3,
        "open_ms": (t1 - t0) * 1e3,
        "run_ms": (t2 - t1) * 1e3,
        "cpu_ms": (c2 - c0) * 1e3,
        "steps_after": out["step"],
    }


# -- in flight ------------------------------------------------------------------


class InFlightState(AgentState, total=False):
    agent: str


def async_builder(model: Model) -> StateGraph[Any]:
    """The same graph, with a ``model`` node that asks the model over HTTP."""

    async def model_node(state: InFlightState) -> dict[str, Any]:
        return {"decision": await model.decide(state["agent"], state["step"])}

    g: StateGraph[Any] = StateGraph(InFlightState)
    g.add_node("model", model_node)
    g.add_node("tool", tool_node)
    g.add_edge(START, "model")
    g.add_edge("model", "tool")
    g.add_conditional_edges("tool", route, ["model", END])
    return g


async def in_flight(args: argparse.Namespace) -> dict[str, Any]:
    from psycopg_pool import AsyncConnectionPool

    pool_size = args.pool or 20
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        with_schema(args.url, args.schema),
        min_size=pool_size,
        max_size=pool_size,
        kwargs=CONN_KWARGS,
        open=False,
    )
    await pool.open(wait=True)
    model = Model(args.model_url)
    try:
        checkpointer = AsyncPostgresSaver(conn=pool)
        await checkpointer.setup()
        graph = async_builder(model).compile(checkpointer=checkpointer)

        async def agent(thread: str, steps: int) -> None:
            out = await graph.ainvoke(
                {"step": 0, "limit": steps, "memory": {}, "agent": thread},
                config(thread, steps),
                durability="sync",
            )
            if out["step"] != steps:
                raise RuntimeError(f"thread {thread} ended at step {out['step']}")

        await asyncio.gather(*(agent(f"warmup-{i}", 2) for i in range(4)))
        model.answers.clear()
        with RssPeak() as rss:
            t0, c0 = time.perf_counter(), time.process_time()
            await asyncio.gather(*(agent(f"agent-{a}", args.steps) for a in range(args.agents)))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        async with pool.connection() as conn:
            cur = await conn.execute("SHOW synchronous_commit")
            sync = (await cur.fetchone())["synchronous_commit"]  # type: ignore[index]
    finally:
        await model.close()
        await pool.close()
    return in_flight_result(
        args.agents,
        args.steps,
        wall,
        args.latency,
        model.answers,
        rss,
        how=f"async graph, ainvoke, AsyncPostgresSaver over a pool of {pool_size} connections",
        synchronous_commit=sync,
        durability="sync",
        cpu_s=cpu,
    )


def cmd_inflight(args: argparse.Namespace) -> dict[str, Any]:
    raise_open_files()
    return asyncio.run(in_flight(args))


COMMANDS = {
    "info": cmd_info,
    "w1": cmd_w1,
    "w2": cmd_w2,
    "w3-build": cmd_w3_build,
    "w3-resume": cmd_w3_resume,
    "inflight": cmd_inflight,
}

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], "python -m bench.peers.langgraph_pg", COMMANDS))
