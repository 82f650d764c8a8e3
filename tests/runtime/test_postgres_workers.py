"""Workers on one PostgreSQL store hear of new work at once, without polling for it.

Two real ``stead work --forever`` processes share a store and look for work
only every 30 seconds; yet a new agent, a person's message and a due timer are
each picked up within a second or two, because the store tells its workers
(``LISTEN``/``NOTIFY``, :mod:`stead.store.postgres_wakeups`). Each step is run
by one worker only, and SIGTERM stops both promptly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import Kind, Runtime, parse_spec
from stead.integrity.audit import audit
from stead.store.postgres import PostgresStore

from ..postgres import fresh_schema, url_for

REPO = Path(__file__).resolve().parents[2]
POLL = "30"


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as schema:
        yield url_for(schema)


def workers(url: str, data: Path, n: int) -> list[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "stead", "work", "--forever", "--poll", POLL,
            "--no-hibernate", "--store", url, "--data-dir", str(data)]  # fmt: skip
    return [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(n)]  # fmt: skip


def agent(rt: Runtime, folder: Path, script: list[Any]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec({"name": "w", "model": "scripted:script.yaml"}, folder)
    return rt.create(spec).agent_id


def until(rt: Runtime, agent_id: str, status: str, within: float) -> float:
    """Seconds until the agent's status is ``status`` (fails after ``within``)."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        if rt.store.load_state(agent_id).status == status:
            return time.monotonic() - start
        time.sleep(0.02)
    pytest.fail(f"agent {agent_id} was not {status} within {within}s "
                f"(it is {rt.store.load_state(agent_id).status})")  # fmt: skip


def test_workers_hear_of_new_work_at_once_and_stop_on_sigterm(url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    rt = Runtime(PostgresStore(url), data)
    procs = workers(url, data, 2)
    try:
        time.sleep(1.5)  # both are listening and idle, next looking in 30 s
        made = agent(rt, tmp_path / "a", [{"wait_for_input": "go?"}, {"finish": "done"}])
        assert until(rt, made, "waiting", 10) < 5
        rt.send(made, "go")  # a person's message: the agent has work again
        assert until(rt, made, "completed", 10) < 5
        timed = agent(rt, tmp_path / "b", [{"wait": {"seconds": 2}}, {"finish": "woke"}])
        until(rt, timed, "waiting", 10)
        assert until(rt, timed, "completed", 10) < 5  # its timer, not the 30 s look
        for agent_id in (made, timed):
            events = list(rt.store.read_events(agent_id))
            assert audit(rt.store, agent_id).ok
            # each decision was made once, by one worker or the other
            steps = [e.data["step"] for e in events if e.kind == Kind.DECISION]
            assert steps == sorted(set(steps))
    finally:
        started = time.monotonic()
        for p in procs:
            p.send_signal(signal.SIGTERM)
        said = [p.communicate(timeout=15)[1] for p in procs]  # and closes the pipes
        stopped_in = time.monotonic() - started
        rt.close()
    assert [p.returncode for p in procs] == [0, 0], said
    assert stopped_in < 5  # not at their next 30 s look


def test_a_write_that_gives_no_new_work_tells_no_one(url: str, tmp_path: Path) -> None:
    """A running agent's steps do not wake the other workers: only a change into work."""
    store = PostgresStore(url)
    rt = Runtime(store, tmp_path / "data")
    made = agent(rt, tmp_path / "a", [{"remember": {"k": 1}}, {"wait_for_input": "?"}])
    assert store.wait_for_work(0.0)  # the first wait starts listening: look now
    rt.run(made)  # created -> running -> waiting: no change into work is written
    assert not store.wait_for_work(0.3)
    rt.send(made, "more")  # waiting -> running: told
    assert store.wait_for_work(2.0)
    assert store.next_wake() is None
    rt.close()
