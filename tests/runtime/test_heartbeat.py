"""A tool call longer than the lease does not let a second worker in."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from stead import LeaseHeld, Runtime, SystemClock, ToolContext, parse_spec, tool
from stead.store.sqlite import SqliteStore
from stead.tools.base import as_tool

STARTED = threading.Event()


@tool(effect="read_only")
def slow(ctx: ToolContext) -> str:
    STARTED.set()
    time.sleep(2.4)
    return "done"


def test_the_lease_is_renewed_while_a_long_tool_runs(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("- {tool: slow}\n- {finish: x}\n")
    ttl = 0.6
    rt = Runtime(
        SqliteStore(tmp_path / "db"), tmp_path / "data", clock=SystemClock(), lease_ttl=ttl
    )
    agent = rt.create(parse_spec({"name": "h", "model": "scripted:s.yaml"}, tmp_path)).agent_id
    worker = threading.Thread(
        target=rt.run, args=(agent,), kwargs={"tools": {"slow": as_tool(slow)}}
    )
    worker.start()
    assert STARTED.wait(10)
    time.sleep(ttl * 2)  # well past the lease's original expiry
    other = SqliteStore(tmp_path / "db")
    with pytest.raises(LeaseHeld):
        other.acquire_lease(agent, "intruder:1", ttl, time.time())
    worker.join(10)
    assert rt.store.load_state(agent).status == "completed"
    # released at the end: now anyone may take it
    assert other.acquire_lease(agent, "intruder:1", ttl, time.time()).owner == "intruder:1"
    other.close()
    rt.close()
