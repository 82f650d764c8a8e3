"""DBOS Transact on a SQLite system database: stead's bench agent as a workflow of steps.

The workflow ``agent(steps)`` runs, for each step, two ``@DBOS.step()``
functions: ``decide(i)`` (the scripted decision) and ``call_tool(decision)``
(``lookup``'s 100-byte result and the memory keys it writes). DBOS records
each step's output in its ``operation_outputs`` table before the workflow
moves on, so both are durable; the memory write travels in ``call_tool``'s
recorded output (the workflow rebuilds its memory from those outputs when it
is recovered), so one agent step is two durable DBOS steps.

Durability: DBOS sets no ``journal_mode`` or ``synchronous`` on its SQLite
connections, so by default it runs SQLite's rollback journal
(``journal_mode=DELETE``) at the library's ``synchronous`` (FULL here). This
script adds a SQLAlchemy ``connect`` listener that sets ``journal_mode=WAL``
and ``synchronous=FULL`` on every connection, the same setting as stead and
LangGraph; ``--variant default`` leaves DBOS's own setting, for information.

Usage: python -m bench.peers.dbos_peer {info,w1,w2,w3-build,w3-resume} --dir D ...
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, DBOSConfig, SetWorkflowID
from sqlalchemy import event

from .common import (
    Marks,
    db_bytes,
    decision_data,
    hard_exit,
    installed,
    main,
    many_result,
    run_tool,
    sqlite_library_defaults,
    sqlite_settings,
    steps_result,
    versions,
)

PRAGMAS: dict[str, str] = {"journal_mode": "WAL", "synchronous": "FULL"}
"""Set on every new SQLite connection; emptied by ``--variant default``."""


@event.listens_for(sa.engine.Engine, "connect")
def _set_pragmas(dbapi_conn: Any, _record: Any) -> None:
    for name, value in PRAGMAS.items():
        dbapi_conn.execute(f"PRAGMA {name}={value}")


MARKS = Marks()
CALLS = {"decide": 0, "call_tool": 0}
HOOK: dict[str, Any] = {"stop_at": None, "mark_at": None, "started": None, "body": None}
"""``stop_at``: end the process as ``decide`` starts step i (building a history).
``mark_at``: note the time as ``decide`` starts step i and report (resuming)."""
DONE = threading.Event()


@DBOS.step()
def decide(i: int) -> dict[str, Any]:
    MARKS.mark()
    CALLS["decide"] += 1
    if i == HOOK["stop_at"]:
        finish_build(i)  # dies mid-step: decide(i) is not recorded
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
        decision = decide(i)
        out = call_tool(decision)
        memory.update(out["memory"])
    return memory


def launch(db: Path, variant: str = "") -> None:
    if variant == "default":
        PRAGMAS.clear()
    config: DBOSConfig = {
        "name": "stead-bench",
        "system_database_url": f"sqlite:///{db}",
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()


def settings() -> dict[str, Any]:
    """The pragmas of a connection from DBOS's own system-database engine."""
    from dbos._dbos import _get_dbos_instance

    engine = _get_dbos_instance()._sys_db.engine
    with engine.connect() as c:
        return sqlite_settings(c.connection.driver_connection)


def run_agent(workflow_id: str, steps: int) -> None:
    with SetWorkflowID(workflow_id):
        memory = agent(steps)
    if memory["looked_up"] != steps:
        raise RuntimeError(f"workflow {workflow_id} ended at {memory['looked_up']}, wanted {steps}")


def rows(db: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(str(db))
    try:
        n: int = conn.execute("SELECT count(*) FROM operation_outputs").fetchone()[0]
        return n
    finally:
        conn.close()


def cmd_info(args: argparse.Namespace) -> dict[str, Any]:
    """The settings DBOS runs with by default, and those used here."""
    launch(args.dir / "default.db", "default")
    default = settings()
    DBOS.destroy()
    PRAGMAS.update(journal_mode="WAL", synchronous="FULL")
    launch(args.dir / "bench.db")
    used = settings()
    DBOS.destroy()
    return {
        "system": "dbos",
        "versions": versions("dbos", "SQLAlchemy"),
        "venv": installed(),
        "python": sys.version.split()[0],
        "sqlite_library": sqlite_library_defaults(),
        "default": default,
        "used": used,
    }


def cmd_w1(args: argparse.Namespace) -> dict[str, Any]:
    db = args.dir / "w1.db"
    launch(db, args.variant)
    try:
        run_agent("warmup", 20)
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
        operations_per_step=(rows(db) - 40) / args.steps,
        variant=args.variant or "wal-full",
        cpu_s=cpu,
    )


def cmd_w2(args: argparse.Namespace) -> dict[str, Any]:
    """``--agents`` workflows of ``--steps`` steps, called one after another.

    ``--variant concurrent`` starts them all with ``DBOS.start_workflow`` instead
    (DBOS's own concurrency: its executor's threads, unbounded by default) and
    waits for every result.
    """
    launch(args.dir / "w2.db")
    try:
        run_agent("warmup", 20)
        ids = [f"agent-{a}" for a in range(args.agents)]
        t0, c0 = time.perf_counter(), time.process_time()
        if args.variant == "concurrent":
            handles = []
            for wid in ids:
                with SetWorkflowID(wid):
                    handles.append(DBOS.start_workflow(agent, args.steps))
            if any(h.get_result()["looked_up"] != args.steps for h in handles):
                raise RuntimeError("an agent did not finish")
        else:
            for wid in ids:
                run_agent(wid, args.steps)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        used = settings()
    finally:
        DBOS.destroy()
    return many_result(
        args.agents,
        args.steps,
        wall,
        concurrency="start_workflow" if args.variant == "concurrent" else "sequential",
        **used,
        cpu_s=cpu,
    )


def cmd_w3_build(args: argparse.Namespace) -> None:
    """A workflow interrupted after ``--steps`` recorded agent steps.

    Runs the real workflow and ends the process (``os._exit``, as a kill would)
    when ``decide`` starts the next step, so ``2 * steps`` operations are recorded
    and the workflow is left PENDING. The builder's connections use
    ``synchronous=OFF`` to go faster (building is not measured, and the
    operating system keeps every page of a process that merely exits).
    """
    PRAGMAS["synchronous"] = "OFF"
    HOOK["started"] = time.perf_counter()
    HOOK["db"] = args.dir / "history.db"
    launch(HOOK["db"])
    HOOK["stop_at"] = args.steps
    # far more steps than any number of resumes will reach
    run_agent("agent", args.steps + 1_000_000)
    raise RuntimeError("the workflow was not interrupted")


def finish_build(i: int) -> None:
    """Called as ``decide(i)`` starts while building: report, then die mid-step."""
    import sqlite3

    build_s = time.perf_counter() - HOOK["started"]
    db: Path = HOOK["db"]
    conn = sqlite3.connect(str(db))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        operations = conn.execute("SELECT count(*) FROM operation_outputs").fetchone()[0]
    finally:
        conn.close()
    hard_exit({"steps": i, "build_s": build_s, "db_bytes": db_bytes(db), "operations": operations})


def report_resume(i: int) -> None:
    """Called as ``decide(i)`` starts, i.e. once step ``i - 1`` is durably recorded."""
    end = time.perf_counter()
    started, body = HOOK["started"], HOOK["body"]
    executed = dict(CALLS)
    # decide(i - 1) (not recorded when the previous process died), call_tool(i - 1), decide(i)
    if executed != {"decide": 2, "call_tool": 1}:
        raise RuntimeError(f"expected to re-run one step, ran {executed}")
    first_new = MARKS.times[0]
    launched = HOOK.get("launched")
    hard_exit(
        {
            "resume_ms": (end - started) * 1e3,
            # DBOS() and DBOS.launch() returning; None if the workflow ran first
            "launch_ms": (launched - started) * 1e3 if launched else None,
            "until_workflow_starts_ms": (body - started) * 1e3,
            "replay_ms": (first_new - body) * 1e3,
            "step_ms": (end - first_new) * 1e3,
            "steps_after": i,
        }
    )


def cmd_w3_resume(args: argparse.Namespace) -> None:
    """In this fresh process: launch DBOS, which recovers the pending workflow.

    ``--steps`` is how many agent steps the workflow has recorded. Timed from
    before constructing ``DBOS`` to the moment ``decide`` starts the step after
    the first new one, i.e. when that new step's last output is recorded; the
    process then ends as a kill would, leaving the workflow pending again for the
    next measurement. Recovery replays every recorded step (each one a lookup of
    its recorded output) before running anything new.
    """
    HOOK["mark_at"] = args.steps + 1
    HOOK["started"] = time.perf_counter()
    launch(args.dir / "history.db")
    HOOK["launched"] = time.perf_counter()
    if not DONE.wait(timeout=600):
        raise RuntimeError("the workflow was not recovered within 600 s")


COMMANDS = {
    "info": cmd_info,
    "w1": cmd_w1,
    "w2": cmd_w2,
    "w3-build": cmd_w3_build,
    "w3-resume": cmd_w3_resume,
}

if __name__ == "__main__":
    logging.getLogger("dbos").setLevel(logging.WARNING)
    sys.exit(main(sys.argv[1:], "python -m bench.peers.dbos_peer", COMMANDS))
