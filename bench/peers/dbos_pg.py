"""DBOS Transact on a PostgreSQL system database: the workflow of :mod:`bench.peers.dbos_peer`.

The same workflow, ``agent(steps)`` over two ``@DBOS.step()`` functions per
agent step, with its system tables in the run's own schema
(``dbos_system_schema``) on the server ``--url``; DBOS's sessions commit with
the server's ``synchronous_commit`` (``on``). This module does not import
``dbos_peer``, whose SQLite ``PRAGMA`` listener must not touch PostgreSQL.

``inflight`` runs the async workflow: ``--agents`` workflows started at once
with ``DBOS.start_workflow_async``, whose ``decide`` step asks the fake model
service over HTTP.

Usage: python -m bench.peers.dbos_pg {info,w1,w2,w3-build,w3-resume,inflight}
       --dir D --url U --schema S ...
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import threading
import time
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID

from .common import (
    Marks,
    decision_data,
    hard_exit,
    installed,
    main,
    many_result,
    run_tool,
    steps_result,
    versions,
)
from .pg import (
    Model,
    RssPeak,
    act,
    in_flight_result,
    raise_open_files,
    schema_bytes,
    server_settings,
)

MARKS = Marks()
CALLS = {"decide": 0, "call_tool": 0}
HOOK: dict[str, Any] = {"stop_at": None, "mark_at": None, "started": None, "body": None}
"""As in ``dbos_peer``: ``stop_at`` ends the process as ``decide`` starts step i
(building a history); ``mark_at`` reports as ``decide`` starts step i (resuming)."""
DONE = threading.Event()
MODEL: dict[str, Model] = {}


@DBOS.step()
def decide(i: int) -> dict[str, Any]:
    MARKS.mark()
    CALLS["decide"] += 1
    if i == HOOK["stop_at"]:
        finish_build(i)
    if i == HOOK["mark_at"]:
        report_resume(i)
    return decision_data(i)


@DBOS.step()
def call_tool(decision: dict[str, Any]) -> dict[str, Any]:
    CALLS["call_tool"] += 1
    result, remember = run_tool(decision)
    return {"result": result, "memory": remember}


@DBOS.workflow()
def agent(steps: int) -> dict[str, Any]:
    if HOOK["body"] is None:
        HOOK["body"] = time.perf_counter()
    memory: dict[str, Any] = {}
    for i in range(steps):
        out = call_tool(decide(i))
        memory.update(out["memory"])
    return memory


@DBOS.step()
async def decide_async(name: str, i: int) -> dict[str, Any]:
    return await MODEL["model"].decide(name, i)


@DBOS.step()
async def call_tool_async(decision: dict[str, Any]) -> dict[str, Any]:
    return act(decision)


@DBOS.workflow()
async def agent_async(name: str, steps: int) -> dict[str, Any]:
    memory: dict[str, Any] = {}
    for i in range(steps):
        out = await call_tool_async(await decide_async(name, i))
        memory.update(out["memory"])
    return memory


def launch(args: argparse.Namespace, synchronous_commit: str = "", pool: int = 0) -> None:
    config: DBOSConfig = {
        "name": "stead-bench",
        "system_database_url": args.url,
        "dbos_system_schema": args.schema,
        "log_level": "WARNING",
    }
    if pool:
        config["sys_db_pool_size"] = pool
    if synchronous_commit:
        config["db_engine_kwargs"] = {
            "connect_args": {"options": f"-c synchronous_commit={synchronous_commit}"},
            "pool_size": 20,
            "max_overflow": 0,
        }
    DBOS(config=config)
    DBOS.launch()


def settings() -> dict[str, Any]:
    """The server's setting as a session of DBOS's own system-database engine sees it."""
    from dbos._dbos import _get_dbos_instance

    engine = _get_dbos_instance()._sys_db.engine
    with engine.connect() as c:
        return server_settings(c.connection.driver_connection)


def operations(args: argparse.Namespace) -> int:
    import psycopg

    with psycopg.connect(args.url) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{args.schema}".operation_outputs').fetchone()
    return int(row[0]) if row else 0


def run_agent(workflow_id: str, steps: int) -> None:
    with SetWorkflowID(workflow_id):
        memory = agent(steps)
    if memory["looked_up"] != steps:
        raise RuntimeError(f"workflow {workflow_id} ended at {memory['looked_up']}, wanted {steps}")


def cmd_info(args: argparse.Namespace) -> dict[str, Any]:
    launch(args)
    used = settings()
    DBOS.destroy()
    return {
        "system": "dbos",
        "versions": versions("dbos", "SQLAlchemy", "psycopg"),
        "venv": installed(),
        "python": sys.version.split()[0],
        "default": used,
        "used": used,
    }


def cmd_w1(args: argparse.Namespace) -> dict[str, Any]:
    launch(args)
    try:
        run_agent("warmup", 20)
        before = operations(args)
        MARKS.times.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        run_agent("agent-0", args.steps)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        used = settings()
    finally:
        DBOS.destroy()
    return steps_result(
        args.steps,
        wall,
        MARKS,
        **used,
        operations_per_step=(operations(args) - before) / args.steps,
        cpu_s=cpu,
    )


def cmd_w2(args: argparse.Namespace) -> dict[str, Any]:
    """``--agents`` workflows of ``--steps`` steps, called one after another."""
    launch(args)
    try:
        run_agent("warmup", 20)
        t0, c0 = time.perf_counter(), time.process_time()
        for a in range(args.agents):
            run_agent(f"agent-{a}", args.steps)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        used = settings()
    finally:
        DBOS.destroy()
    return many_result(args.agents, args.steps, wall, concurrency="sequential", **used, cpu_s=cpu)


def cmd_w3_build(args: argparse.Namespace) -> None:
    """A workflow interrupted after ``--steps`` recorded agent steps (as in ``dbos_peer``),
    built with ``synchronous_commit=off`` (not measured; the server stays up)."""
    HOOK["started"] = time.perf_counter()
    HOOK["args"] = args
    launch(args, synchronous_commit="off")
    HOOK["stop_at"] = args.steps
    run_agent("agent", args.steps + 1_000_000)
    raise RuntimeError("the workflow was not interrupted")


def finish_build(i: int) -> None:
    args = HOOK["args"]
    build_s = time.perf_counter() - HOOK["started"]
    hard_exit(
        {
            "steps": i,
            "build_s": build_s,
            "db_bytes": schema_bytes(args.url, args.schema),
            "operations": operations(args),
        }
    )


def report_resume(i: int) -> None:
    end = time.perf_counter()
    started, body = HOOK["started"], HOOK["body"]
    executed = dict(CALLS)
    if executed != {"decide": 2, "call_tool": 1}:
        raise RuntimeError(f"expected to re-run one step, ran {executed}")
    first_new = MARKS.times[0]
    launched = HOOK.get("launched")
    hard_exit(
        {
            "resume_ms": (end - started) * 1e3,
            "launch_ms": (launched - started) * 1e3 if launched else None,
            "until_workflow_starts_ms": (body - started) * 1e3,
            "replay_ms": (first_new - body) * 1e3,
            "step_ms": (end - first_new) * 1e3,
            "steps_after": i,
        }
    )


def cmd_w3_resume(args: argparse.Namespace) -> None:
    """In this fresh process: launch DBOS, which recovers the pending workflow."""
    HOOK["mark_at"] = args.steps + 1
    HOOK["started"] = time.perf_counter()
    launch(args)
    HOOK["launched"] = time.perf_counter()
    if not DONE.wait(timeout=600):
        raise RuntimeError("the workflow was not recovered within 600 s")


async def in_flight(args: argparse.Namespace) -> dict[str, Any]:
    model = MODEL["model"] = Model(args.model_url)
    try:

        async def one(name: str, steps: int) -> None:
            with SetWorkflowID(name):
                handle = await DBOS.start_workflow_async(agent_async, name, steps)
            if (await handle.get_result())["looked_up"] != steps:
                raise RuntimeError(f"workflow {name} did not finish")

        async def run(names: list[str], steps: int) -> None:
            # every agent handed over at once, as LangGraph's are by gathering ainvoke
            await asyncio.gather(*(one(name, steps) for name in names))

        await run([f"warmup-{i}" for i in range(4)], 2)
        model.answers.clear()
        with RssPeak() as rss:
            t0, c0 = time.perf_counter(), time.process_time()
            await run([f"agent-{a}" for a in range(args.agents)], args.steps)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await model.close()
    return in_flight_result(
        args.agents,
        args.steps,
        wall,
        args.latency,
        model.answers,
        rss,
        how="async workflows, DBOS.start_workflow_async, system database pool of "
        f"{args.pool or 20} connections",
        **settings(),
        cpu_s=cpu,
    )


def cmd_inflight(args: argparse.Namespace) -> dict[str, Any]:
    raise_open_files()
    launch(args, pool=args.pool)
    try:
        return asyncio.run(in_flight(args))
    finally:
        DBOS.destroy()


COMMANDS = {
    "info": cmd_info,
    "w1": cmd_w1,
    "w2": cmd_w2,
    "w3-build": cmd_w3_build,
    "w3-resume": cmd_w3_resume,
    "inflight": cmd_inflight,
}

if __name__ == "__main__":
    logging.getLogger("dbos").setLevel(logging.WARNING)
    sys.exit(main(sys.argv[1:], "python -m bench.peers.dbos_pg", COMMANDS))
