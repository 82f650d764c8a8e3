"""Schedules fired in-process with a fake clock, on every backend.

An agent woken every hour gets its message once per due time, in its journal;
catch-up and overlap policies decide what late and overlapping due times do; a
paused schedule fires nothing; a fresh agent is made per run from a spec; a
schedule row the agent's journal does not hold wakes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.errors import NotFound, UsageError
from stead.schedules import Schedules, fire_due
from stead.schedules.book import rows_of

from ..runtime.conftest import make_agent

HOUR = 3600.0
WAIT = {"wait_for_input": "what next?"}


def clock(rt: Runtime) -> FakeClock:
    assert isinstance(rt.clock, FakeClock)
    return rt.clock


def fired(rt: Runtime, agent: str) -> list[float]:
    return [e.data["due"] for e in rt.store.read_events(agent) if e.kind == Kind.SCHEDULE_FIRED]


def said(rt: Runtime, agent: str) -> list[str]:
    return [e.data["text"] for e in rt.store.read_events(agent)
            if e.kind == Kind.INPUT_RECEIVED and e.data.get("schedule_id")]  # fmt: skip


def waiting_agent(rt: Runtime, tmp_path: Path, steps: int = 20) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    agent = make_agent(rt, tmp_path, [WAIT] * steps)
    assert rt.run(agent).state.status == "waiting"
    return agent


def test_an_agent_is_woken_once_per_due_time_with_its_message(
    runtime: Runtime, tmp_path: Path
) -> None:
    rt = runtime
    agent = waiting_agent(rt, tmp_path)
    book = Schedules(rt)
    made = book.add(agent_id=agent, every="1h", message="check the inbox")
    start = clock(rt).now()
    assert made.next_due == pytest.approx(start + HOUR)
    assert fire_due(rt).delivered == []  # not due yet
    clock(rt).advance(HOUR)
    report = fire_due(rt)
    assert report.delivered == [(made.schedule_id, made.next_due, agent)]
    assert fire_due(rt).delivered == []  # the same due time is not fired twice
    assert fired(rt, agent) == [made.next_due]
    assert said(rt, agent) == ["check the inbox"]
    state = rt.store.load_state(agent)
    assert state.status == "running"  # woken: it has work
    rt.run(agent)
    assert rt.store.load_state(agent).status == "waiting"
    clock(rt).advance(HOUR)
    fire_due(rt)
    assert fired(rt, agent) == [made.next_due, made.next_due + HOUR]
    kinds = [e.kind for e in rt.store.read_events(agent)]
    assert kinds.count(Kind.SCHEDULE_SET) == 1
    assert book.get(made.schedule_id).runs == 2


def test_catch_up_one_fires_the_latest_missed_time_and_records_the_rest(
    runtime: Runtime, tmp_path: Path
) -> None:
    rt = runtime
    agent = waiting_agent(rt, tmp_path)
    made = Schedules(rt).add(agent_id=agent, every="1h", message="report", catch_up="one")
    clock(rt).advance(5 * HOUR + 600)  # no worker ran for five hours
    report = fire_due(rt)
    first = made.next_due
    assert first is not None
    assert [d for _, d, _ in report.delivered] == [first + 4 * HOUR]
    assert report.missed == 4
    shown = Schedules(rt).firings(made.schedule_id)
    assert [(f.state, f.count) for f in shown] == [("delivered", 1), ("missed", 4)]
    assert Schedules(rt).get(made.schedule_id).next_due == first + 5 * HOUR


def test_catch_up_skip_fires_nothing_late_and_all_fires_each_in_turn(
    runtime: Runtime, tmp_path: Path
) -> None:
    rt = runtime
    skipper = waiting_agent(rt, tmp_path / "a")
    queued = waiting_agent(rt, tmp_path / "b")
    book = Schedules(rt)
    skip = book.add(agent_id=skipper, every="1h", message="s", catch_up="skip")
    every = book.add(agent_id=queued, every="1h", message="a", catch_up="all",
                     max_catch_up=3, overlap="queue")  # fmt: skip
    clock(rt).advance(5 * HOUR + 600)
    report = fire_due(rt)
    assert fired(rt, skipper) == []
    first = every.next_due
    assert first is not None
    # all: the latest three, one run at a time (queued behind each other)
    assert fired(rt, queued) == [first + 2 * HOUR]
    assert every.schedule_id in report.waiting
    for expected in (3, 4):
        rt.run(queued)
        fire_due(rt)
        assert fired(rt, queued) == [first + h * HOUR for h in range(2, expected + 1)]
    assert {f.state for f in book.firings(skip.schedule_id)} == {"missed"}


def test_overlap_skip_passes_over_a_time_while_the_agent_still_works(
    runtime: Runtime, tmp_path: Path
) -> None:
    rt = runtime
    agent = waiting_agent(rt, tmp_path)
    made = Schedules(rt).add(agent_id=agent, every="1h", message="go", overlap="skip")
    clock(rt).advance(HOUR)
    fire_due(rt)  # woken, and not run since: its run has not ended
    clock(rt).advance(HOUR)
    report = fire_due(rt)
    assert report.skipped and "had not ended" in report.skipped[0][2]
    assert len(fired(rt, agent)) == 1
    assert [f.state for f in Schedules(rt).firings(made.schedule_id)] == ["skipped", "delivered"]


def test_a_paused_schedule_fires_nothing_and_resumes_from_now(
    runtime: Runtime, tmp_path: Path
) -> None:
    rt = runtime
    agent = waiting_agent(rt, tmp_path)
    book = Schedules(rt)
    made = book.add(agent_id=agent, every="1h", message="go")
    book.pause(made.schedule_id)
    clock(rt).advance(3 * HOUR)
    assert fire_due(rt).delivered == [] and fired(rt, agent) == []
    assert book.view(book.get(made.schedule_id)).upcoming == []
    resumed = book.resume(made.schedule_id)
    assert resumed.next_due is not None and resumed.next_due > clock(rt).now()
    changes = [
        e.data["change"] for e in rt.store.read_events(agent) if e.kind == Kind.SCHEDULE_CHANGED
    ]
    assert changes == ["paused", "resumed"]
    book.remove(made.schedule_id)
    with pytest.raises(NotFound):
        book.get(made.schedule_id)
    assert rt.store.load_state(agent).schedules == {}


def test_a_spec_schedule_makes_a_fresh_agent_per_run(runtime: Runtime, tmp_path: Path) -> None:
    rt = runtime
    import yaml

    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"finish": "done"}]), encoding="utf-8")
    spec = parse_spec({"name": "nightly", "model": "scripted:script.yaml", "tools": []}, tmp_path)
    book = Schedules(rt)
    made = book.add(spec=spec, cron="0 3 * * *", tz="Europe/Paris", overlap="cancel_previous")
    due = made.next_due
    assert due is not None and due > clock(rt).now()
    clock(rt).advance(due - clock(rt).now())
    first = fire_due(rt).delivered
    assert len(first) == 1
    run = first[0][2]
    assert run is not None and rt.store.get_record(run).name == "nightly"
    assert fired(rt, run) == [due]
    # not run before the next one falls due: cancel_previous cancels it
    clock(rt).advance(24 * HOUR)
    second = fire_due(rt).delivered
    assert len(second) == 1 and second[0][2] != run
    assert rt.store.load_state(run).status == "cancelled"
    assert rt.run(second[0][2] or "").state.status == "completed"


def test_an_agent_that_finished_ends_its_schedule(runtime: Runtime, tmp_path: Path) -> None:
    rt = runtime
    agent = make_agent(rt, tmp_path, [WAIT, {"finish": "done"}])
    rt.run(agent)
    made = Schedules(rt).add(agent_id=agent, every="1h", message="go on")
    clock(rt).advance(HOUR)
    fire_due(rt)
    rt.run(agent)
    assert rt.store.load_state(agent).status == "completed"
    clock(rt).advance(HOUR)
    report = fire_due(rt)
    assert report.failed and "completed" in report.failed[0][2]
    stored = Schedules(rt).get(made.schedule_id)
    assert stored.paused and stored.next_due is None
    Schedules(rt).remove(made.schedule_id)  # a finished agent's schedule can still go
    assert Schedules(rt).list() == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"every": "1h"}, "needs a message"),
        ({"message": "x"}, "exactly one of cron"),
        ({"message": "x", "every": "1h", "cron": "* * * * *"}, "exactly one"),
        ({"message": "x", "cron": "61 * * * *"}, "0 to 59"),
        ({"message": "x", "cron": "0 0 30 2 *"}, "no time in the next five years"),
        ({"message": "x", "every": "1h", "tz": "Mars/Olympus"}, "not a time zone"),
        ({"message": "x", "every": "0s"}, "above 0"),
        ({"message": "x", "every": "1h", "overlap": "cancel_previous"}, "fresh agents"),
        ({"message": "x", "every": "1h", "catch_up": "some"}, "one of skip, one, all"),
        ({"message": "x", "at": "2020-01-01T00:00:00Z"}, "has passed"),
        ({"message": "x", "every": "1h", "colour": "red"}, "no field 'colour'"),
    ],
)
def test_bad_definitions_are_refused_with_what_to_write(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    rt = Runtime(__import__("stead").store.memory.MemoryStore(), tmp_path / "d", clock=FakeClock())
    agent = waiting_agent(rt, tmp_path)
    with pytest.raises(UsageError, match=message):
        Schedules(rt).add(agent_id=agent, **fields)
    assert Schedules(rt).list() == []
    assert [e.kind for e in rt.store.read_events(agent)].count(Kind.SCHEDULE_SET) == 0


@pytest.mark.parametrize("kind", ["threaded", "parked"])
def test_a_worker_pass_fires_what_is_due_and_runs_the_agents_it_woke(
    runtime: Runtime, tmp_path: Path, kind: str
) -> None:
    from stead.workers.parked import ParkedWorker
    from stead.workers.threaded import Worker

    rt = runtime
    agent = waiting_agent(rt, tmp_path)
    made = Schedules(rt).add(agent_id=agent, every="1h", message="go", jitter="10m")
    worker = Worker(rt, concurrency=2) if kind == "threaded" else ParkedWorker(rt, 4, threads=1)
    assert worker.run_until_idle().ran == {}
    assert made.fire_at is not None and made.next_due is not None
    assert made.next_due <= made.fire_at < made.next_due + 600  # its jitter, seeded
    clock(rt).advance(made.fire_at - clock(rt).now() + 1)
    report = worker.run_until_idle()
    assert report.ran == {agent: "waiting"}  # woken, ran a step, waits again
    assert fired(rt, agent) == [made.next_due]
    assert [d for _, d, _ in worker.fired.delivered] == [made.next_due]


def test_a_pass_that_died_after_recording_or_delivering_is_finished_once_by_the_next(
    runtime: Runtime, tmp_path: Path
) -> None:
    """The two places a worker can die mid-firing: after recording the due time (nothing
    delivered yet), and after the journal got it (the firing not yet settled)."""
    from stead.schedules.delivery import deliver
    from stead.schedules.firing import CLAIM_HOLD, FireReport, _record_due

    rt = runtime
    agent = waiting_agent(rt, tmp_path)
    made = Schedules(rt).add(agent_id=agent, every="1h", message="go", overlap="queue")
    rows = rows_of(rt.store)
    clock(rt).advance(HOUR)
    (claimed,) = rows.claim_schedules("dead-1", clock(rt).now(), CLAIM_HOLD, 10)
    _record_due(rt, rows, "dead-1", claimed, clock(rt).now(), FireReport())  # then it died
    assert fired(rt, agent) == [] and len(rows.pending_firings(made.schedule_id)) == 1
    assert fire_due(rt).delivered == []  # its claim holds the schedule until it lapses
    clock(rt).advance(CLAIM_HOLD)
    assert [d for _, d, _ in fire_due(rt).delivered] == [made.next_due]
    assert fired(rt, agent) == [made.next_due]

    rt.run(agent)
    clock(rt).advance(HOUR)
    (claimed,) = rows.claim_schedules("dead-2", clock(rt).now(), CLAIM_HOLD, 10)
    _record_due(rt, rows, "dead-2", claimed, clock(rt).now(), FireReport())
    (pending,) = rows.pending_firings(made.schedule_id)
    stored = rows.get_schedule(made.schedule_id)
    assert stored is not None
    assert deliver(rt, stored, pending) is not None  # in the journal; then it died
    clock(rt).advance(CLAIM_HOLD)
    again = fire_due(rt)
    assert [d for _, d, _ in again.delivered] == [pending.due]
    assert fired(rt, agent) == [made.next_due, pending.due]  # not twice
    assert rows.firings(made.schedule_id)[0].detail == "found in the agent's journal"
