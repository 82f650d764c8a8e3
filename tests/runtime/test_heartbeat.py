"""A tool call longer than the lease does not let a second worker in."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, LeaseHeld, Runtime, SystemClock, ToolContext, parse_spec, tool
from stead.errors import StoreUnusable
from stead.journal import Kind, NewEvent
from stead.runtime.heartbeat import Heartbeats
from stead.store.base import AgentRecord
from stead.store.memory import MemoryStore
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


class _Down(MemoryStore):
    """A store that cannot be reached while ``down`` is set."""

    down = False

    def renew_leases(self, leases: Any, ttl: float, now: float) -> Any:
        if self.down:
            raise StoreUnusable("the store cannot be used now")
        return super().renew_leases(leases, ttl, now)


def test_shared_heartbeats_renew_every_lease_and_give_up_the_lost_ones() -> None:
    store, clock = _Down(), FakeClock()
    for agent_id in ("ag_1", "ag_2", "ag_3"):
        store.create_agent(
            AgentRecord(agent_id, "t1", "n", {}, clock.now()),
            [NewEvent(Kind.AGENT_CREATED, {"tenant": "t1", "name": "n"})],
            at=clock.now(),
        )
    beats = Heartbeats(store, 30.0, clock)  # its own thread waits 10 s: rounds run here
    lost: list[str] = []
    renewed: list[tuple[str, float]] = []  # what moves each sandbox's deadline on
    try:
        leases = {a: store.acquire_lease(a, "w1", 30.0, clock.now()) for a in ("ag_1", "ag_2")}
        for agent_id, lease in leases.items():
            beats.add(
                lease,
                lambda a=agent_id: lost.append(a),
                lambda new: renewed.append((new.agent_id, new.expires_at)),
            )
        clock.advance(20)
        beats.renew()
        assert [store.get_lease(a).expires_at for a in leases] == [clock.now() + 30] * 2  # type: ignore[union-attr]
        assert renewed == [("ag_1", clock.now() + 30), ("ag_2", clock.now() + 30)]
        # another worker takes ag_2 over: its renewal is refused, it is given up once
        store.acquire_lease("ag_2", "w2", 30.0, clock.now(), takeover="w1")
        renewed.clear()
        beats.renew()
        beats.renew()
        assert lost == ["ag_2"]
        assert [a for a, _ in renewed] == ["ag_1", "ag_1"]
        # a store that cannot be reached loses nothing while the lease may still be
        # this worker's, and gives it up once it has certainly lapsed
        store.down = True
        beats.renew()
        assert lost == ["ag_2"]
        clock.advance(31)
        beats.renew()
        assert lost == ["ag_2", "ag_1"]
        # a discarded lease is no longer renewed
        third = store.acquire_lease("ag_3", "w1", 30.0, clock.now())
        beats.add(third, lambda: lost.append("ag_3"))
        beats.discard("ag_3")
        store.down = False
        clock.advance(100)
        beats.renew()
        assert lost == ["ag_2", "ag_1"]
        assert store.get_lease("ag_3") == third
    finally:
        beats.close()
