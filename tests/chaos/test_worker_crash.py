"""Killing a worker that runs many agents at once: a new worker brings them all back.

A real ``stead work`` process runs 16 agents with group commit and is killed
with SIGKILL several times mid-flight; each new worker takes over the dead
one's leases at once, and in the end every agent has completed with every
effect exactly once and a journal that audits clean.

Each worker is killed a random moment after it is seen inside an activation,
and a kill counts only if the store shows that it cut activations short (see
:mod:`tests.chaos.midwork`): how long a worker takes to start, on a loaded
machine, decides when it is killed, not whether the kill tests anything.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

import pytest

from stead import Runtime, load_spec
from stead.integrity.audit import audit
from stead.store.sqlite import SqliteStore

from .cli_helpers import Cli, write_spec
from .midwork import Cut, Watch, kill_measured, taken_up_again, wait_busy

AGENTS = 16
DECISIONS = 12
KILLS = 3  # kills that cut activations short
KILL_WITHIN = (0.0, 0.3)  # seconds after the worker is seen inside an activation
TRIES = 10  # workers started before the test gives up, saying what it measured


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
    watch = Watch.sqlite(cli.db)
    cuts: list[Cut] = []
    landed = tries = 0
    try:
        while landed < KILLS:
            assert tries < TRIES, f"{landed} of {tries} workers were killed mid-work"
            tries += 1
            worker = cli.popen("work", "--concurrency", "8")
            wait_busy(worker, watch)
            time.sleep(rng.uniform(*KILL_WITHIN))
            assert worker.poll() is None, (
                f"the worker finished every agent before it could be killed, after {landed} "
                f"kills that landed mid-work: lengthen the work ({worker.communicate()})"
            )
            cut = kill_measured(worker, watch)
            landed += bool(cut)
            cuts += cut
    finally:
        watch.close()

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
        events = list(store.read_events(agent))
        for cut in cuts:
            if cut.agent_id == agent:
                assert taken_up_again(events, cut), f"{cut} was not taken up again"
    assert len(lines) == AGENTS * DECISIONS
    store.close()
