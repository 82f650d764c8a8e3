"""Workload 5, stead's side: a worker killed during 100 active agents, and a new one.

A ``stead work`` process drives the agents (each step calls a tool that takes
50 ms, like a short API call, so all of them are mid-run at once). Once every
agent has completed a couple of steps, the worker is killed with SIGKILL and a
new ``stead work`` process is started on the same store. Measured: the time
from starting the new worker to every agent having completed a step in it
("running again"), which includes starting Python and importing stead.
"""

from __future__ import annotations

import functools
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from stead import Runtime, parse_spec, tool
from stead.store import codec

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOL_SECONDS = 0.05
STEPS = 400
DEADLINE = 120.0


@tool(effect="idempotent")
def slow_lookup(key: str) -> dict[str, Any]:
    """A lookup that takes as long as a short network call."""
    time.sleep(TOOL_SECONDS)
    return {"key": key, "status": "ok"}


def _states(db: Path) -> dict[str, dict[str, Any]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = con.execute("SELECT agent_id, state FROM agents").fetchall()
    finally:
        con.close()
    return {agent_id: json.loads(codec.unpack(text, "a state row")) for agent_id, text in rows}


def _wait(states: Callable[[], dict[str, dict[str, Any]]], done: Any, what: str) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < DEADLINE:
        if done(states()):
            return time.perf_counter()
        time.sleep(0.005)
    raise RuntimeError(f"workload 5: timed out waiting for {what}")


def _worker(url: str, data: Path, agents: int, extra: Sequence[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stead",
            "work",
            "--concurrency",
            str(agents),
            "--store",
            url,
            "--data-dir",
            str(data),
            *extra,
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def measure(
    workdir: Path,
    agents: int = 100,
    url: str = "",
    states: Callable[[], dict[str, dict[str, Any]]] | None = None,
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    """Kill a worker running ``agents`` agents; time a new worker bringing them back.

    On SQLite, or on the store ``url`` whose agents' states ``states()`` reads;
    ``extra`` is added to each worker's command line.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    db, data = workdir / "stead.db", workdir / "data"
    if not url:
        url = f"sqlite:///{db}"
        states = functools.partial(_states, db)
    assert states is not None
    script = [{"tool": "slow_lookup", "args": {"key": f"k{i}"}} for i in range(STEPS)]
    (workdir / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec(
        {
            "name": "crash",
            "model": f"scripted:{workdir / 'script.yaml'}",
            "tools": ["bench.crash_stead:slow_lookup"],
            "limits": {"max_steps": STEPS + 10},
        },
        REPO_ROOT,
    )
    rt = Runtime(url, data)
    for _ in range(agents):
        rt.create(spec)
    rt.close()

    first = _worker(url, data, agents, extra)
    try:
        _wait(
            states,
            lambda s: len(s) == agents and all(x["steps_completed"] >= 2 for x in s.values()),
            "every agent to be running in the first worker",
        )
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed_at = time.perf_counter()
    before = {a: x["steps_completed"] for a, x in states().items()}

    started = time.perf_counter()
    second = _worker(url, data, agents, extra)
    try:
        all_back = _wait(
            states,
            lambda s: all(
                x["activations"] >= 2 and x["steps_completed"] > before[a] for a, x in s.items()
            ),
            "every agent to complete a step in the new worker",
        )
    finally:
        second.send_signal(signal.SIGKILL)
        second.wait()
    return {
        "agents": agents,
        "recovery_s": all_back - started,
        "from_kill_s": all_back - killed_at,
        "steps_before_kill_median": sorted(before.values())[len(before) // 2],
    }


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
        print(json.dumps(measure(Path(tmp)), indent=2))
