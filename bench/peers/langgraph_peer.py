"""LangGraph with ``SqliteSaver``: stead's bench agent as a two-node graph.

The graph: ``START -> model -> tool -> (model | END)``. ``model`` returns the
scripted decision for the current step; ``tool`` calls ``lookup`` (100 bytes of
JSON), writes the memory keys into the state and counts the step; the
conditional edge loops until ``step == limit``. The state stays the same size
however long the agent runs (no growing message list), which is the cheapest
case for a checkpointer that writes the whole state every superstep.

Durability: the graph runs with ``durability="sync"``, so each superstep's
checkpoint is written before the next superstep starts; LangGraph's default,
``"async"``, writes it in a background thread while the next node already runs
(``--variant async`` measures that, for information). The connection is opened
here, as ``SqliteSaver.from_conn_string`` opens it (``check_same_thread=False``),
plus ``PRAGMA synchronous=FULL`` (``SqliteSaver.setup`` sets
``journal_mode=WAL`` itself and leaves ``synchronous`` at the library default).

Usage: python -m bench.peers.langgraph_peer {info,w1,w2,w3-build,w3-resume} --dir D ...
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from .common import (
    Marks,
    db_bytes,
    decision_data,
    installed,
    main,
    many_result,
    run_tool,
    sqlite_library_defaults,
    sqlite_settings,
    steps_result,
    versions,
)

DISTS = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite")


class AgentState(TypedDict, total=False):
    step: int
    limit: int
    decision: dict[str, Any]
    result: dict[str, Any]
    memory: dict[str, Any]


MARKS = Marks()
CALLS = {"model": 0, "tool": 0}


def model_node(state: AgentState) -> dict[str, Any]:
    MARKS.mark()
    CALLS["model"] += 1
    return {"decision": decision_data(state["step"])}


def tool_node(state: AgentState) -> dict[str, Any]:
    CALLS["tool"] += 1
    result, remember = run_tool(state["decision"])
    return {
        "result": result,
        "memory": {**state.get("memory", {}), **remember},
        "step": state["step"] + 1,
    }


def route(state: AgentState) -> str:
    return "model" if state["step"] < state["limit"] else END


def builder() -> StateGraph[Any]:
    g: StateGraph[Any] = StateGraph(AgentState)
    g.add_node("model", model_node)
    g.add_node("tool", tool_node)
    g.add_edge(START, "model")
    g.add_edge("model", "tool")
    g.add_conditional_edges("tool", route, ["model", END])
    return g


def connect(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """A connection as ``SqliteSaver.from_conn_string`` makes it, plus ``synchronous``."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


def durability(args: argparse.Namespace) -> str:
    return "async" if args.variant == "async" else "sync"


def config(thread: str, steps: int) -> dict[str, Any]:
    # each step is two supersteps; the default recursion limit would stop a long run
    return {"configurable": {"thread_id": thread}, "recursion_limit": 2 * steps + 10}


def run_agent(graph: Any, thread: str, steps: int, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = graph.invoke(
        {"step": 0, "limit": steps, "memory": {}}, config(thread, steps), durability=mode
    )
    if out["step"] != steps or out["memory"]["looked_up"] != steps:
        raise RuntimeError(f"thread {thread} ended at step {out['step']}, wanted {steps}")
    return out


def rows(conn: sqlite3.Connection) -> dict[str, int]:
    return {
        t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("checkpoints", "writes")
    }


def warm_up(workdir: Path, mode: str) -> None:
    """One short run in a scratch database, so imports and first calls are not timed."""
    conn = connect(workdir / "warmup.db")
    try:
        run_agent(builder().compile(checkpointer=SqliteSaver(conn)), "warmup", 20, mode)
    finally:
        conn.close()


def cmd_info(args: argparse.Namespace) -> dict[str, Any]:
    with SqliteSaver.from_conn_string(str(args.dir / "default.db")) as saver:
        saver.setup()
        default = sqlite_settings(saver.conn)
    conn = connect(args.dir / "bench.db")
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        used = sqlite_settings(conn)
    finally:
        conn.close()
    return {
        "system": "langgraph",
        "versions": versions(*DISTS),
        "venv": installed(),
        "python": sys.version.split()[0],
        "sqlite_library": sqlite_library_defaults(),
        "default": {**default, "durability": "async"},
        "used": {**used, "durability": "sync"},
    }


def cmd_w1(args: argparse.Namespace) -> dict[str, Any]:
    mode = durability(args)
    warm_up(args.dir, mode)
    conn = connect(args.dir / "w1.db")
    try:
        graph = builder().compile(checkpointer=SqliteSaver(conn))
        MARKS.times.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        run_agent(graph, "agent-0", args.steps, mode)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        settings, counts = sqlite_settings(conn), rows(conn)
    finally:
        conn.close()
    return steps_result(
        args.steps,
        wall,
        MARKS,
        durability=mode,
        **settings,
        checkpoints_per_step=counts["checkpoints"] / args.steps,
        writes_per_step=counts["writes"] / args.steps,
        cpu_s=cpu,
    )


def cmd_w2(args: argparse.Namespace) -> dict[str, Any]:
    """``--agents`` threads of ``--steps`` steps each, one ``invoke`` after another.

    ``--variant batch`` hands them all to ``graph.batch`` instead (LangGraph's
    own concurrency: a thread pool sharing the saver's one connection).
    """
    mode = "sync"
    warm_up(args.dir, mode)
    conn = connect(args.dir / "w2.db")
    try:
        graph = builder().compile(checkpointer=SqliteSaver(conn))
        threads = [f"agent-{a}" for a in range(args.agents)]
        t0, c0 = time.perf_counter(), time.process_time()
        if args.variant == "batch":
            outs = graph.batch(
                [{"step": 0, "limit": args.steps, "memory": {}} for _ in threads],
                [config(t, args.steps) for t in threads],
                durability=mode,
            )
            if any(o["step"] != args.steps for o in outs):
                raise RuntimeError("an agent did not finish")
        else:
            for t in threads:
                run_agent(graph, t, args.steps, mode)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        settings = sqlite_settings(conn)
    finally:
        conn.close()
    return many_result(
        args.agents,
        args.steps,
        wall,
        concurrency="graph.batch" if args.variant == "batch" else "sequential",
        durability=mode,
        **settings,
        cpu_s=cpu,
    )


def cmd_w3_build(args: argparse.Namespace) -> dict[str, Any]:
    """A thread that has run ``--steps`` steps, one checkpoint per superstep.

    Built by running the real graph; the builder's connection uses
    ``synchronous=OFF`` to go faster (building is not measured, and the process
    ends normally, so the operating system has every page).
    """
    path = args.dir / "history.db"
    t0 = time.perf_counter()
    conn = connect(path, synchronous="OFF")
    try:
        run_agent(builder().compile(checkpointer=SqliteSaver(conn)), "agent", args.steps, "sync")
        counts = rows(conn)
    finally:
        conn.close()
    return {
        "steps": args.steps,
        "build_s": time.perf_counter() - t0,
        "db_bytes": db_bytes(path),
        **counts,
    }


def cmd_w3_resume(args: argparse.Namespace) -> dict[str, Any]:
    """In this fresh process: open the saver, compile, invoke ONE more step on the thread.

    ``--steps`` is how many steps the thread has made so far. Timed from before
    connecting to ``invoke`` returning (the step's checkpoint is written by then).
    """
    path, done = args.dir / "history.db", args.steps
    g = builder()
    t0, c0 = time.perf_counter(), time.process_time()
    conn = connect(path)
    graph = g.compile(checkpointer=SqliteSaver(conn))
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


COMMANDS = {
    "info": cmd_info,
    "w1": cmd_w1,
    "w2": cmd_w2,
    "w3-build": cmd_w3_build,
    "w3-resume": cmd_w3_resume,
}

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], "python -m bench.peers.langgraph_peer", COMMANDS))
