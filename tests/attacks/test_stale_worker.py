"""Boundary: a stopped or stale worker (docs/security.md).

A worker can be stopped at any moment (``SIGSTOP``, a frozen VM, a
debugger) with a sandboxed command running, and woken long after another
worker took its agent over. What must never happen: anything the stale
worker started writes to the workspace once another worker may have the
agent. The heartbeat that kills a lost lease's sandbox is a thread of the
worker and stops with it, so the sandbox is held to the lease's expiry by a
watchdog process outside the worker (:mod:`stead.sandbox.watchdog`).

This replays the attack found on main: SIGSTOP a worker during a long
command past its lease; its command went on writing into the workspace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from stead.sandbox.bwrap import BwrapSandbox
from stead.store.sqlite import SqliteStore

pytestmark = pytest.mark.chaos

TTL = 5.0
TICKER = "while :; do date +%s.%N >> ticks; sleep 0.1; done"


def _ticks(path: Path) -> list[float]:
    if not path.exists():
        return []
    return [float(t) for t in path.read_text().split()]


def test_a_stopped_workers_sandbox_stops_writing_when_its_lease_ends(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    folder = tmp_path / "spec"
    folder.mkdir()
    script = [{"tool": "shell", "args": {"command": TICKER, "timeout": 300}}, {"finish": "x"}]
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    (folder / "agent.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "ticker",
                "model": "scripted:script.yaml",
                "tools": ["shell"],
                "limits": {"command_seconds": 300},
            }
        ),
        encoding="utf-8",
    )
    db, data = tmp_path / "s.db", tmp_path / "data"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                from pathlib import Path
                from stead import Runtime
                from stead.spec import load_spec
                from stead.store.sqlite import SqliteStore
                rt = Runtime(SqliteStore(Path({str(db)!r})), Path({str(data)!r}))
                rt.lease_ttl = {TTL}
                agent = rt.create(load_spec(Path({str(folder / "agent.yaml")!r}))).agent_id
                print(agent, rt.workspace(agent, "default").root, flush=True)
                rt.run(agent)
            """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        agent, root = worker.stdout.readline().split()
        ticks = Path(root) / "ticks"
        waited = time.monotonic() + 60
        while len(_ticks(ticks)) < 5:  # the command runs: the worker holds the lease
            assert worker.poll() is None and time.monotonic() < waited, "the command never ran"
            time.sleep(0.1)
        os.kill(worker.pid, signal.SIGSTOP)
        store = SqliteStore(db)
        try:
            lease = store.get_lease(agent)
        finally:
            store.close()
        assert lease is not None
        # the stopped worker renews nothing: wait until its lease has run out
        # and another worker could have the agent, and a little longer
        while time.time() < lease.expires_at + 2:
            time.sleep(0.2)
        seen = _ticks(ticks)
        time.sleep(1.0)
        assert _ticks(ticks) == seen, "the stopped worker's command still writes"
        assert seen and max(seen) < lease.expires_at, (max(seen), lease.expires_at)
    finally:
        worker.kill()
        worker.wait()
        if worker.stdout is not None:
            worker.stdout.close()
