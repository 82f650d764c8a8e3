"""Killing a worker that runs many agents at once: a new worker brings them all back.

A real ``stead work`` process runs 16 agents with group commit and is killed
with SIGKILL several times mid-flight; each new worker takes over the dead
one's leases at once, and in the end every agent has completed with every
effect exactly once and a journal that audits clean.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from stead import Runtime, load_spec
from stead.integrity.audit import audit
from stead.store.sqlite import SqliteStore

from .cli_helpers import Cli, write_spec

AGENTS = 16
DECISIONS = 12
KILLS = 3


@pytest.mark.chaos
def test_a_killed_worker_s_agents_all_complete_exactly_once(tmp_path: Path) -> None:
    cli = Cli(tmp_path, STEAD_TEST_PAUSE="0.03")
    script = [
        {"tool": "append_idempotent" if n % 2 else "append_reconciled", "args": {"n": n}}
        for n in range(DECISIONS)
    ] + [{"finish": "done"}]
    spec = load_spec(write_spec(tmp_path / "spec", script))
    rt = Runtime(SqliteStore(cli.db), cli.data_dir)
    agents = [rt.create(spec).agent_id for _ in range(AGENTS)]
    rt.close()

    rng = random.Random(20261202)
    kills = 0
    for _ in range(KILLS):
        worker = cli.popen("work", "--concurrency", "8")
        time.sleep(rng.uniform(0.8, 1.6))
        if worker.poll() is None:
            worker.send_signal(signal.SIGKILL)
            kills += 1
        worker.communicate(timeout=30)
    assert kills >= 2, "the workers finished before they could be killed; lengthen the work"

    final = cli.run("work", "--concurrency", "8", "--json", timeout=120)
    assert final.returncode == 0, final.stderr

    store = SqliteStore(cli.db)
    lines = Counter(cli.ledger_lines())
    assert all(n == 1 for n in lines.values()), "an effect happened twice"
    for agent in agents:
        state = store.load_state(agent)
        assert state.status == "completed", (agent, state.status, state.status_reason)
        assert state.steps_completed == DECISIONS + 1
        report = audit(store, agent)
        assert report.ok, report.reason
        calls = [e.data["call_id"] for e in store.read_events(agent) if e.kind == "tool_result"]
        assert len(calls) == len(set(calls)) == DECISIONS
    assert len(lines) == AGENTS * DECISIONS
    store.close()
