"""A worker that lost its lease does not touch the workspace any more.

Worker A stalls inside a call past its lease (as a SIGSTOPped process does);
worker B takes the agent over and finishes it; then A goes on. The store
already refuses A's journal writes (tests/chaos/test_lease_race.py); these
check the workspace: A's file write is refused at the last moment, and A's
running command is killed as soon as its heartbeat learns of the takeover.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, Runtime, parse_spec
from stead.errors import StoreError
from stead.sandbox.bwrap import BwrapSandbox
from stead.store.sqlite import SqliteStore
from stead.tools.base import Tool, as_tool
from stead.tools.builtin import shell, write_file

from . import stale_tools

pytestmark = pytest.mark.chaos

NOTE = "tests.chaos.stale_tools:note"


def _spec(tmp_path: Path, script: list[Any], tools: dict[str, Tool]) -> Any:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), "utf-8")
    return parse_spec(
        {"name": "stale", "model": "scripted:script.yaml", "tools": list(tools)}, tmp_path
    )


def test_a_stale_worker_does_not_rewrite_a_file_after_a_takeover(tmp_path: Path) -> None:
    entered, wake = stale_tools.entered, stale_tools.wake
    entered.clear()
    wake.clear()
    stale_tools.calls.clear()
    tools = {NOTE: as_tool(stale_tools.note), "write_file": as_tool(write_file)}
    script = [
        {"tool": NOTE, "args": {"text": "first"}},
        {"tool": "write_file", "args": {"path": "note.txt", "content": "final"}},
        {"finish": "ok"},
    ]
    spec = _spec(tmp_path, script, tools)
    clock_a, clock_b = FakeClock(), FakeClock()
    rt_a = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=clock_a)
    rt_b = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=clock_b)
    agent_id = rt_a.create(spec).agent_id
    worker_a = threading.Thread(target=_quietly, args=(rt_a, agent_id, tools))
    try:
        worker_a.start()
        assert entered.wait(30), "worker A never reached its tool"
        clock_b.advance(rt_b.lease_ttl + 1)  # A's lease has run out by B's clock
        assert rt_b.run(agent_id, tools=tools).state.status == "completed"
        note_file = tmp_path / "data" / "workspaces" / "default" / agent_id / "note.txt"
        assert note_file.read_text() == "final"
        wake.set()
        worker_a.join(30)
        assert not worker_a.is_alive()
        assert note_file.read_text() == "final", "the stale worker rewrote a finished agent's file"
        assert rt_b.store.load_state(agent_id).manifest["note.txt"]
    finally:
        wake.set()
        rt_a.close()
        rt_b.close()


def test_a_stale_workers_command_is_killed_when_its_heartbeat_learns_of_a_takeover(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    tools = {"shell": as_tool(shell)}
    script = [
        {"tool": "shell", "args": {"command": "touch started; sleep 20; echo late > late.txt"}},
        {"finish": "ok"},
    ]
    spec = _spec(tmp_path, script, tools)
    clock_a, clock_b = FakeClock(), FakeClock()
    # a short lease, so A's heartbeat tries to renew within a second
    rt_a = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=clock_a, lease_ttl=1.5)
    rt_b = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=clock_b, lease_ttl=1.5)
    agent_id = rt_a.create(spec).agent_id
    workspace = tmp_path / "data" / "workspaces" / "default" / agent_id
    worker_a = threading.Thread(target=_quietly, args=(rt_a, agent_id, tools))
    try:
        worker_a.start()
        deadline = time.monotonic() + 30
        while not (workspace / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (workspace / "started").exists(), "worker A's command never started"
        clock_b.advance(10)  # A's lease has run out by B's clock: B takes the agent
        outcome = rt_b.run(agent_id, tools=tools)
        # an effectful call without reconcile is never re-run: a person decides
        assert outcome.state.status == "needs_attention"
        worker_a.join(15)  # far sooner than the command's 20 s
        assert not worker_a.is_alive(), "the stale worker's command was not killed"
        assert not (workspace / "late.txt").exists()
    finally:
        rt_a.close()
        rt_b.close()


def _quietly(rt: Runtime, agent_id: str, tools: dict[str, Tool]) -> None:
    """Run as the stale worker: its final commit is refused, which is the point."""
    with contextlib.suppress(StoreError):
        rt.run(agent_id, tools=tools)
