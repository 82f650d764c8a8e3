"""Two real workers race to fire the same schedules, and one is killed (SIGKILL)
mid-run: every due time still reaches its agent's journal exactly once.

Each agent has a schedule whose due times lie in the past (every 60 s over the
last half hour, ``catch_up: all``, ``overlap: queue``), so the workers fire
them one after another as each run ends. Worker A is killed once some have
been delivered and others have not; worker B goes on (after A's claims lapse)
and delivers the rest. The journal and the firings table then agree: each due
time once, in order, none lost.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from stead import FakeClock, Kind, Runtime, load_spec
from stead.integrity.audit import audit
from stead.schedules import Schedules
from stead.schedules.book import rows_of
from stead.store import open_store
from tests.postgres import fresh_schema, url_for

from .cli_helpers import Cli, write_spec

AGENTS = 3
MINUTES = 25


@contextmanager
def store_url(kind: str, cli: Cli) -> Iterator[str]:
    if kind == "sqlite":
        cli.db.parent.mkdir(parents=True, exist_ok=True)
        yield cli.url
        return
    with fresh_schema() as schema:
        yield url_for(schema)


def fired(store: object, agent: str) -> list[float]:
    return [e.data["due"] for e in store.read_events(agent)  # type: ignore[attr-defined]
            if e.kind == Kind.SCHEDULE_FIRED]  # fmt: skip


@pytest.mark.chaos
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_racing_workers_one_killed_fire_each_due_time_once(kind: str, tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    with store_url(kind, cli) as url:
        script = [{"wait_for_input": "next?"}] * (MINUTES + 5)
        spec = load_spec(write_spec(tmp_path / "spec", script, tools=[]))
        # made half an hour ago, and no worker has run since
        rt = Runtime(
            open_store(url), cli.data_dir, clock=FakeClock(time.time() - MINUTES * 60 - 30)
        )
        book = Schedules(rt)
        agents, expected = [], {}
        start = rt.clock.now()
        for _ in range(AGENTS):
            agent = rt.create(spec).agent_id
            assert rt.run(agent).state.status == "waiting"
            made = book.add(agent_id=agent, every="60s", start=start, message="tick",
                            catch_up="all", max_catch_up=100, overlap="queue")  # fmt: skip
            assert made.next_due is not None
            dues = [made.next_due, *book.view(made).definition.upcoming(made.next_due, 100)]
            expected[agent] = [d for d in dues if d <= time.time()]
            agents.append(agent)
        rt.close()
        assert all(len(v) >= MINUTES - 1 for v in expected.values())
        total = sum(len(v) for v in expected.values())

        store = open_store(url)
        argv = [sys.executable, "-m", "stead", "work", "--forever", "--poll", "0.05",
                "--store", url, "--data-dir", str(cli.data_dir)]  # fmt: skip

        def worker() -> subprocess.Popen[bytes]:
            return subprocess.Popen(argv, cwd=tmp_path, env=cli.env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)  # fmt: skip

        first, second = worker(), worker()
        procs = [first, second]
        try:
            deadline = time.monotonic() + 120
            while sum(len(fired(store, a)) for a in agents) < total // 3:
                assert first.poll() is None and second.poll() is None, first.communicate()
                assert time.monotonic() < deadline, "the workers delivered too little in 120 s"
                time.sleep(0.02)
            first.send_signal(signal.SIGKILL)
            first.communicate(timeout=10)
            at_kill = sum(len(fired(store, a)) for a in agents)
            assert at_kill < total, "everything was delivered before the kill"
            deadline = time.monotonic() + 180
            while sum(len(fired(store, a)) for a in agents) < total:
                assert second.poll() is None, second.communicate()
                assert time.monotonic() < deadline, (
                    f"{sum(len(fired(store, a)) for a in agents)} of {total} delivered"
                )
                time.sleep(0.1)
            time.sleep(1.0)  # anything delivered twice would show by now
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=60)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
        try:
            rows = rows_of(store)
            for agent in agents:
                got = fired(store, agent)
                # each due time once, in order; one that fell due during the run may follow
                assert got[: len(expected[agent])] == expected[agent], (agent, len(got))
                assert len(got) <= len(expected[agent]) + 2
                assert all(b - a == pytest.approx(60) for a, b in itertools.pairwise(got))
                told = [e for e in store.read_events(agent)
                        if e.kind == Kind.INPUT_RECEIVED and e.data.get("schedule_id")]  # fmt: skip
                assert len(told) == len(got)
                (schedule,) = rows.list_schedules(agent_id=agent)
                firings = rows.firings(schedule.schedule_id, 1000)
                assert sorted(f.due for f in firings) == got
                assert {f.state for f in firings} == {"delivered"} and schedule.pending == 0
                report = audit(store, agent)
                assert report.ok, report.reason
        finally:
            store.close()
