"""Durable timers: a ``wait`` fires once, on whichever worker is up when it is due.

A real worker is killed while its agent waits on a timer; two workers started
after the due time race for it and the timer fires once. In-process, with a
fake clock and on every backend: a timer already due fires at the next run, the
store's index returns a waiting agent only once its timer is due, only waiting
agents count as idle, and a timer survives hibernation. Bad ``wait`` forms are
refused when the script is read.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime, load_spec
from stead.errors import ScriptError
from stead.integrity.audit import audit
from stead.models.base import parse_action
from stead.models.scripted import ScriptedModel
from stead.snapshots.hibernation import hibernate
from stead.state import State
from stead.store.memory import MemoryStore
from stead.store.sqlite import SqliteStore
from stead.workers.threaded import Worker

from ..chaos.cli_helpers import Cli, write_spec
from ..runtime.conftest import make_agent

BARRIER = Path(__file__).resolve().parents[1] / "chaos" / "barrier_main.py"
CONTENT = "tick\n" * 50


def wait_until(what: str, check: Any, timeout: float, interval: float = 0.05) -> Any:
    """Poll ``check()`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def kinds(store: Any, agent: str) -> list[str]:
    return [e.kind for e in store.read_events(agent)]


def reads(store: Any, agent: str) -> list[Any]:
    return [
        e
        for e in store.read_events(agent)
        if e.kind == Kind.TOOL_RESULT and e.data["tool"] == "read_file"
    ]


# -- a real worker killed while its agent waits ------------------------------------------


@pytest.mark.chaos
def test_a_timer_set_before_its_worker_died_fires_once_when_workers_come_back(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    script = [
        {"tool": "write_file", "args": {"path": "t.txt", "content": CONTENT}},
        {"wait": {"seconds": 2, "reason": "look again in two seconds"}},
        {"tool": "read_file", "args": {"path": "t.txt"}},
        {"finish": "read it after the wait"},
    ]
    spec = load_spec(write_spec(tmp_path / "spec", script, tools=["write_file", "read_file"]))
    rt = Runtime(SqliteStore(cli.db), cli.data_dir)
    agent = rt.create(spec).agent_id
    rt.close()
    store = SqliteStore(cli.db)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        first = cli.popen("work", "--forever", "--poll", "0.1")
        procs.append(first)

        def on_timer() -> State | None:
            assert first.poll() is None, first.communicate()
            s = store.load_state(agent)
            return s if s.status == "waiting" and s.timer is not None else None

        waiting = wait_until("the agent to wait on its timer", on_timer, timeout=15)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
        assert first.returncode == -signal.SIGKILL

        # the worker died with the timer pending: nothing fired it
        assert waiting.timer is not None
        due = waiting.timer["due_at"]
        assert Kind.TIMER_FIRED not in kinds(store, agent)
        assert time.time() < due, "the worker was killed after the timer was due"
        assert reads(store, agent) == []
        # no worker is up while the timer comes due
        wait_until("the timer to be due", lambda: time.time() > due + 0.05, timeout=5)
        assert store.load_state(agent).status == "waiting"
        assert store.agents_to_run(time.time()) == [agent]

        gates = tmp_path / "gates"
        gates.mkdir()
        go = gates / "go"
        ready = [gates / f"ready-{i}" for i in range(2)]
        for r in ready:
            procs.append(
                cli.popen(
                    "work",
                    "--forever",
                    "--poll",
                    "0.05",
                    "--json",
                    prefix=(str(BARRIER), str(r), str(go)),
                )
            )
        wait_until("both workers to be ready", lambda: all(r.exists() for r in ready), 30)
        go.touch()
        done = wait_until(
            "the agent to complete",
            lambda: store.load_state(agent).status in ("completed", "failed", "needs_attention"),
            timeout=20,
        )
        assert done
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        reports = []
        for proc in procs[1:]:
            stdout, stderr = proc.communicate(timeout=20)
            assert proc.returncode == 0, stderr.decode()
            reports.append(json.loads(stdout))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    try:
        state = store.load_state(agent)
        assert state.status == "completed", (state.status, state.status_reason)
        events = list(store.read_events(agent))
        fired = [e for e in events if e.kind == Kind.TIMER_FIRED]
        assert len(fired) == 1
        assert fired[0].data["timer_id"] == waiting.timer["timer_id"]
        assert fired[0].at >= due
        (read,) = reads(store, agent)
        assert read.seq > fired[0].seq and read.data["ok"] and read.data["output"] == CONTENT
        # one activation continued the agent after the timer fired
        started = [e for e in events if e.kind == Kind.ACTIVATION_STARTED and e.seq > fired[0].seq]
        assert len(started) == 1
        assert any(r["ran"].get(agent) == "completed" for r in reports), reports
        assert all(r["errors"] == {} for r in reports), reports
        report = audit(store, agent)
        assert report.ok, report.reason
    finally:
        store.close()


# -- in-process, with a fake clock, on every backend -------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def rt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
    runtime = Runtime(store, tmp_path / "data", clock=FakeClock())
    yield runtime
    runtime.close()


def clock_of(rt: Runtime) -> FakeClock:
    assert isinstance(rt.clock, FakeClock)
    return rt.clock


def test_a_wait_until_a_past_time_fires_at_the_next_run(rt: Runtime, tmp_path: Path) -> None:
    past = clock_of(rt).now() - 100
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"wait": {"until": past}},
            {"tool": "write_file", "args": {"path": "after.txt", "content": "x"}},
            {"finish": "waited"},
        ],
    )
    first = rt.run(agent)
    assert first.state.status == "waiting" and first.state.waiting_for == "timer"
    assert first.state.timer is not None and first.state.timer["due_at"] == past
    assert Kind.TIMER_FIRED not in kinds(rt.store, agent)
    # already due: the index offers it without the clock moving
    assert rt.store.agents_to_run(clock_of(rt).now()) == [agent]

    second = rt.run(agent)
    assert second.state.status == "completed"
    assert second.state.timer is None
    events = list(rt.store.read_events(agent))
    fired = [e for e in events if e.kind == Kind.TIMER_FIRED]
    assert len(fired) == 1 and fired[0].data["due_at"] == past
    assert kinds(rt.store, agent).count(Kind.ACTIVATION_STARTED) == 2
    assert rt.store.agents_to_run(clock_of(rt).now()) == []
    assert rt.run(agent).steps == 0
    assert kinds(rt.store, agent).count(Kind.TIMER_FIRED) == 1


def test_a_waiting_agent_is_offered_to_workers_only_once_its_timer_is_due(
    rt: Runtime, tmp_path: Path
) -> None:
    clock = clock_of(rt)
    agent = make_agent(rt, tmp_path, [{"wait": {"seconds": 60}}, {"finish": "later"}])
    assert rt.store.agents_to_run(clock.now()) == [agent]  # created: it has work
    set_at = clock.now()
    assert rt.run(agent).state.waiting_for == "timer"
    state = rt.store.load_state(agent)
    assert state.timer is not None
    due = state.timer["due_at"]
    assert due == set_at + 60

    assert rt.store.agents_to_run(clock.now()) == []
    assert rt.store.agents_to_run(due - 0.001) == []
    assert Worker(rt).run_until_idle().ran == {}
    assert Kind.TIMER_FIRED not in kinds(rt.store, agent)
    clock.advance(59)
    assert Worker(rt).run_until_idle().ran == {}
    assert rt.store.load_state(agent).status == "waiting"

    assert rt.store.agents_to_run(due) == [agent]
    clock.advance(1)
    assert rt.store.agents_to_run(clock.now()) == [agent]
    assert Worker(rt).run_until_idle().ran == {agent: "completed"}
    assert kinds(rt.store, agent).count(Kind.TIMER_FIRED) == 1
    assert rt.store.agents_to_run(clock.now() + 10_000) == []


def test_only_waiting_agents_idle_since_a_time_are_idle(rt: Runtime, tmp_path: Path) -> None:
    clock = clock_of(rt)
    write = {"tool": "write_file", "args": {"path": "w.txt", "content": "w"}}

    def agent(script: list[Any], folder: str) -> str:
        (tmp_path / folder).mkdir()
        return make_agent(rt, tmp_path / folder, script)

    asks = agent([write, {"wait_for_input": "?"}, {"finish": "ok"}], "asks")
    sleeps = agent([write, {"wait": {"seconds": 3600}}, {"finish": "ok"}], "sleeps")
    frozen = agent([write, {"wait_for_input": "?"}, {"finish": "ok"}], "frozen")
    busy = agent([write, write, {"finish": "ok"}], "busy")
    done = agent([{"finish": "ok"}], "done")
    fresh = agent([{"finish": "ok"}], "fresh")

    t1 = clock.now()
    assert rt.run(asks).state.status == "waiting"
    clock.advance(10)
    t2 = clock.now()
    assert rt.run(sleeps).state.status == "waiting"
    assert rt.run(frozen).state.status == "waiting"
    hibernate(rt, frozen)
    assert rt.run(busy, max_steps=1).state.status == "running"
    assert rt.run(done).state.status == "completed"
    statuses = {a.agent_id: a.status for a in rt.store.list_agents()}
    assert statuses[frozen] == "hibernated" and statuses[fresh] == "created"

    assert rt.store.idle_agents(t1 - 1) == []
    assert rt.store.idle_agents(t1) == [asks]
    assert rt.store.idle_agents(t2 - 0.001) == [asks]
    assert rt.store.idle_agents(t2) == sorted([asks, sleeps])
    clock.advance(100_000)
    assert rt.store.idle_agents(clock.now()) == sorted([asks, sleeps])
    # a message makes the asking agent running: no longer idle
    rt.send(asks, "here")
    assert rt.store.idle_agents(clock.now()) == [sleeps]


def test_a_timer_survives_hibernation_and_wakes_the_agent(rt: Runtime, tmp_path: Path) -> None:
    clock = clock_of(rt)
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"tool": "write_file", "args": {"path": "keep.txt", "content": CONTENT}},
            {"wait": {"seconds": 3600, "reason": "check in an hour"}},
            {"tool": "read_file", "args": {"path": "keep.txt"}},
            {"finish": "checked"},
        ],
    )
    rt.run(agent)
    timer = rt.store.load_state(agent).timer
    assert timer is not None
    snap = hibernate(rt, agent)
    ws = rt.workspace(agent, "default").root
    assert not ws.exists()
    state = rt.store.load_state(agent)
    assert state.status == "hibernated" and state.timer == timer
    assert state.hibernated is not None and state.hibernated["status"] == "waiting"
    # asleep, and not due: no worker is offered it, and a worker pass leaves it be
    assert rt.store.agents_to_run(clock.now()) == []
    assert rt.store.idle_agents(clock.now() + 10_000) == []
    assert Worker(rt).run_until_idle().ran == {}
    assert rt.store.load_state(agent).status == "hibernated"

    clock.advance(3600)
    assert rt.store.agents_to_run(clock.now()) == [agent]
    assert Worker(rt).run_until_idle().ran == {agent: "completed"}
    events = list(rt.store.read_events(agent))
    order = [e.kind for e in events if e.kind in (Kind.TIMER_FIRED, Kind.RESTORED)]
    assert order == [Kind.TIMER_FIRED, Kind.RESTORED]
    (read,) = reads(rt.store, agent)
    assert read.data["ok"] and read.data["output"] == CONTENT
    assert rt.store.get_snapshot(snap.snapshot_id).consumed
    final = rt.store.load_state(agent)
    assert final.hibernated is None and final.timer is None
    assert (ws / "keep.txt").read_text() == CONTENT


# -- bad wait forms -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "'wait' seconds must be a number of seconds, 0 or more"),
        ({"seconds": -0.5}, "'wait' seconds must be a number of seconds, 0 or more"),
        ({"until": -1}, "'wait' until must be a number of seconds, 0 or more"),
        (True, "'wait' takes a number of seconds, or {seconds: N} or {until: EPOCH_SECONDS}"),
        ({"seconds": True}, "'wait' seconds must be a number of seconds, 0 or more"),
        ({"until": False}, "'wait' until must be a number of seconds, 0 or more"),
        ({"seconds": 5, "until": 1_800_000_000}, "'wait' takes a number of seconds, or"),
        ({}, "'wait' takes a number of seconds, or"),
        ({"reason": "no time given"}, "'wait' takes a number of seconds, or"),
        (None, "'wait' takes a number of seconds, or"),
        ("soon", "'wait' takes a number of seconds, or"),
        ({"seconds": "10"}, "'wait' seconds must be a number of seconds, 0 or more"),
    ],
)
def test_a_bad_wait_is_refused_with_what_it_takes(value: Any, message: str) -> None:
    with pytest.raises(ScriptError, match="^where: " + re.escape(message)):
        parse_action({"wait": value}, "where")
    # in a script, the error names the decision it is in
    with pytest.raises(ScriptError, match=r"script: decision 2, action 1: " + re.escape(message)):
        ScriptedModel.from_data([{"finish": "x"}, {"wait": value}])


def test_a_bad_wait_in_its_stored_form_is_refused_too() -> None:
    with pytest.raises(ScriptError, match="'wait' seconds must be a number of seconds"):
        parse_action({"type": "wait", "seconds": -3}, "where")
    with pytest.raises(ScriptError, match="'wait' takes a number of seconds"):
        parse_action({"type": "wait", "seconds": 3, "until": 4}, "where")


def test_good_wait_forms_parse() -> None:
    assert parse_action({"wait": 0}, "w") == {"type": "wait", "seconds": 0, "reason": ""}
    assert parse_action({"wait": 2.5}, "w") == {"type": "wait", "seconds": 2.5, "reason": ""}
    assert parse_action({"wait": {"until": 1_800_000_000, "reason": "r"}}, "w") == {
        "type": "wait",
        "until": 1_800_000_000,
        "reason": "r",
    }
