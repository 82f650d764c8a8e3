"""One live copy, ever: workers racing for one agent, and a worker that lost its lease.

Two real ``stead resume`` processes are started on the same agent at the same
moment; exactly one may run it, the other must be turned away with exit code 4,
and the journal must show one activation's work, once. Then the fencing behind
it: a worker whose lease was taken over while it was paused can no longer write,
whether it notices on renewal or only when its commit reaches the store.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, Kind, Runtime, StaleEpoch, ToolContext, parse_spec, tool
from stead.errors import LeaseHeld
from stead.journal import NewEvent, verify_chain
from stead.spec import load_spec
from stead.store.base import AgentRecord
from stead.store.sqlite import SqliteStore
from stead.tools.base import as_tool
from stead.tools.builtin import write_file

from .cli_helpers import EXIT_BUSY, EXIT_COMPLETED, LEDGER_TOOLS, Cli, write_spec

pytestmark = pytest.mark.chaos

BARRIER = Path(__file__).with_name("barrier_main.py")


def race_script(gate: Path) -> list[Any]:
    """The winner's first call holds the agent until ``gate`` exists (two minutes at
    most): until the loser has been turned away, however slowly it started."""
    return [
        {"tool": "slow_idempotent", "args": {"seconds": 120, "until": str(gate)}},
        {"tool": "append_idempotent", "args": {"n": 1}},
        {
            "tools": [
                {"tool": "append_reconciled", "args": {"n": 2}},
                {"tool": "write_file", "args": {"path": "raced.txt", "content": "once\n"}},
                {"tool": "append_plain", "args": {"n": 3}},
            ]
        },
        {"finish": "raced"},
    ]


def create_without_running(cli: Cli, agent_id: str, script: list[Any]) -> None:
    """Create the agent and start one activation that makes no step (``run(max_steps=0)``).

    The command line refuses ``--max-steps 0`` (it would leave the agent running
    for nobody), so the setup goes through the library, against the same store.
    """
    spec = write_spec(cli.root / agent_id, script, name=agent_id)
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    rt = Runtime(SqliteStore(cli.db), cli.data_dir)
    try:
        rt.create(load_spec(spec), agent_id)
        outcome = rt.run(agent_id, max_steps=0)
    finally:
        rt.close()
    report = {"status": outcome.state.status, "version": outcome.state.version}
    assert report["status"] == "running" and outcome.steps == 0, report
    # agent_created, a grant per tool the spec lists, activation_started
    assert report["version"] == 2 + 1 + len(LEDGER_TOOLS)


def gate(cli: Cli, agent_id: str) -> Path:
    return cli.root / f"{agent_id}.raced"


def wait_for_files(paths: list[Path], procs: list[Any], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        for proc in procs:
            assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "the racing workers never got ready"
        time.sleep(0.005)


def race(cli: Cli, agent_id: str, barrier: bool) -> list[tuple[int, str, str]]:
    """Start two ``stead resume`` workers on one agent at once; return their outcomes."""
    if barrier:
        go = cli.root / f"{agent_id}.go"
        ready = [cli.root / f"{agent_id}.ready{i}" for i in range(2)]
        procs = [
            cli.popen("resume", agent_id, "--json", prefix=(str(BARRIER), str(r), str(go)))
            for r in ready
        ]
        wait_for_files(ready, procs)
        go.touch()
    else:
        procs = [cli.popen("resume", agent_id, "--json") for _ in range(2)]
    # the first to end is the loser (the winner waits in its first call for the gate);
    # then the winner may go on
    deadline = time.monotonic() + 120
    while all(proc.poll() is None for proc in procs):
        assert time.monotonic() < deadline, "neither racing worker ended in 120 s"
        time.sleep(0.01)
    gate(cli, agent_id).touch()
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        outcomes.append((proc.returncode, out.decode(), err.decode()))
    return outcomes


@pytest.mark.parametrize(
    ("barrier", "attempt"),
    [(True, 1), (True, 2), (True, 3), (False, 1), (False, 2)],
    ids=["barrier-1", "barrier-2", "barrier-3", "back-to-back-1", "back-to-back-2"],
)
def test_two_workers_resuming_one_agent(tmp_path: Path, barrier: bool, attempt: int) -> None:
    cli = Cli(tmp_path)
    agent_id = f"ag_race_{attempt}"
    script = race_script(gate(cli, agent_id))
    create_without_running(cli, agent_id, script)

    outcomes = race(cli, agent_id, barrier)
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [EXIT_COMPLETED, EXIT_BUSY], outcomes
    (_, won, _), (_, _, lost) = sorted(outcomes)
    assert f"agent {agent_id} is being run by worker" in lost, lost
    report = json.loads(won)
    assert report["status"] == "completed" and report["steps_this_run"] == len(script), report

    events = cli.trace(agent_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    kinds = Counter(e["kind"] for e in events)
    assert kinds["activation_started"] == 2  # the setup run, and the one winner
    assert kinds["decision"] == kinds["step_completed"] == len(script)
    # everything after setup was written under one epoch: the loser wrote nothing
    setup = next(i for i, e in enumerate(events) if e["kind"] == "activation_started")
    assert {e["epoch"] for e in events[setup + 1 :]} == {events[setup]["epoch"] + 1}
    intents = Counter(e["data"]["call_id"] for e in events if e["kind"] == "tool_intent")
    results = Counter(e["data"]["call_id"] for e in events if e["kind"] == "tool_result")
    decided = [
        a["call_id"]
        for e in events
        if e["kind"] == "decision"
        for a in e["data"]["actions"]
        if a["type"] == "tool"
    ]
    assert len(decided) == 5 and set(intents) == set(results) == set(decided)
    assert set(intents.values()) == set(results.values()) == {1}
    assert not any(e["data"].get("rerun") for e in events if e["kind"] == "tool_result")

    ledger = Counter(cli.ledger_lines())
    assert sorted(line.split()[0] for line in ledger) == ["A", "I", "R", "S"]
    assert set(ledger.values()) == {1}

    with SqliteStore(cli.db) as store:
        lease = store.get_lease(agent_id)
    assert lease is not None and lease.epoch == events[-1]["epoch"] and lease.owner == ""

    audit = cli.run("audit", "verify", agent_id, "--json")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert json.loads(audit.stdout)["head_hash"] == cli.show(agent_id)["head_hash"]


def _agent(store: SqliteStore, agent_id: str, at: float) -> None:
    record = AgentRecord(agent_id, "default", "fenced", {"name": "fenced"}, at)
    created = NewEvent(
        Kind.AGENT_CREATED, {"name": "fenced", "tenant": "default", "goals": [], "manifest": {}}
    )
    store.create_agent(record, [created], at)


def test_a_worker_that_lost_its_lease_cannot_write(tmp_path: Path) -> None:
    a, b = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    try:
        _agent(a, "ag_fenced", 1000.0)
        lease_a = a.acquire_lease("ag_fenced", "worker-a", 10.0, 1000.0)
        with pytest.raises(LeaseHeld, match="being run by worker worker-a"):
            b.acquire_lease("ag_fenced", "worker-b", 10.0, 1009.0)
        lease_b = b.acquire_lease("ag_fenced", "worker-b", 10.0, 1011.0)  # A's has expired
        assert lease_b.epoch == lease_a.epoch + 1

        state_a = a.load_state("ag_fenced")
        write = [NewEvent(Kind.MEMORY_WRITTEN, {"values": {"by": "a"}})]
        with pytest.raises(StaleEpoch):
            a.commit(state_a, write, epoch=lease_a.epoch, at=1012.0)
        with pytest.raises(StaleEpoch):
            a.renew_lease(lease_a, 10.0, 1012.0)
        a.release_lease(lease_a)  # a stale release gives nothing up

        for store in (a, b):
            assert [e.seq for e in store.read_events("ag_fenced")] == [1]
            assert store.load_state("ag_fenced").version == 1
            assert store.load_state("ag_fenced").memory == {}
        held = b.get_lease("ag_fenced")
        assert held is not None and (held.owner, held.epoch) == ("worker-b", lease_b.epoch)

        # the new holder writes normally, and the old one is still refused after it
        _, state_b = b.commit(
            b.load_state("ag_fenced"),
            [NewEvent(Kind.MEMORY_WRITTEN, {"values": {"by": "b"}})],
            epoch=lease_b.epoch,
            at=1013.0,
        )
        assert state_b.version == 2 and state_b.memory == {"by": "b"}
        with pytest.raises(StaleEpoch):
            a.commit(a.load_state("ag_fenced"), write, epoch=lease_a.epoch, at=1014.0)
        assert a.load_state("ag_fenced").memory == {"by": "b"}
        assert verify_chain(a.read_events("ag_fenced")).ok
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("renews", [False, True], ids=["fenced-at-write", "fenced-at-renew"])
def test_a_paused_worker_cannot_commit_after_a_takeover(tmp_path: Path, renews: bool) -> None:
    """Worker A stalls inside a tool past its lease; B takes over and finishes; A wakes.

    With ``renews`` A's clock has moved on, so A tries to renew first; without it
    A's clock stood still (as a paused process's idea of time can), so only the
    store's epoch check at commit stands between A and the journal.
    """
    entered, wake = threading.Event(), threading.Event()
    calls: list[str] = []

    @tool(effect="idempotent")
    def stall(ctx: ToolContext) -> dict[str, str]:
        calls.append(ctx.idempotency_key)
        if len(calls) == 1:  # only A's call stalls
            entered.set()
            wake.wait(30)
        return {"call": ctx.call_id}

    tools = {"stall": as_tool(stall), "write_file": as_tool(write_file)}
    script = [{"tool": "stall"}, {"tool": "write_file", "args": {"path": "b.txt", "content": "B"}}]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([*script, {"finish": "ok"}]), "utf-8")
    spec = parse_spec(
        {"name": "paused", "model": "scripted:script.yaml", "tools": list(tools)}, tmp_path
    )
    clock_a, clock_b = FakeClock(), FakeClock()
    rt_a = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=clock_a)
    rt_b = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=clock_b)
    failure: list[BaseException] = []

    def run_a() -> None:
        try:
            rt_a.run(agent_id, tools=tools)
        except BaseException as exc:
            failure.append(exc)

    try:
        agent_id = rt_a.create(spec, "ag_paused").agent_id
        worker_a = threading.Thread(target=run_a)
        worker_a.start()
        assert entered.wait(30), "worker A never reached its tool"
        clock_b.advance(rt_b.lease_ttl + 1)  # A's lease has run out by B's clock
        outcome = rt_b.run(agent_id, tools=tools)
        assert outcome.state.status == "completed"
        finished = [e.hash for e in rt_b.store.read_events(agent_id)]

        if renews:
            clock_a.advance(rt_a.lease_ttl + 1)
        wake.set()
        worker_a.join(30)
        assert not worker_a.is_alive()
        assert len(failure) == 1 and isinstance(failure[0], StaleEpoch), failure

        events = list(rt_b.store.read_events(agent_id))
        assert [e.hash for e in events] == finished, "the paused worker wrote after a takeover"
        assert verify_chain(events).ok
        assert rt_b.store.load_state(agent_id).status == "completed"
        # B re-ran the idempotent call with the same key; A's result was never recorded
        assert len(calls) == 2 and calls[0] == calls[1]
        results = [e for e in events if e.kind == Kind.TOOL_RESULT and e.data["tool"] == "stall"]
        assert len(results) == 1 and results[0].data["rerun"] is True
        assert results[0].epoch == events[-1].epoch != events[1].epoch
    finally:
        wake.set()
        rt_a.close()
        rt_b.close()
