"""At least 200 SIGKILLs across three workers on one PostgreSQL store.

Three ``stead work`` processes run a dozen agents whose every decision calls an
effectful or idempotent tool that appends to a ledger outside the store (which
no restore can undo). Every few hundred milliseconds one worker, picked at
random, is SIGKILLed and a new one started in its place; its agents' leases
lapse and the others claim them. Afterwards every agent has completed, every
effect happened exactly once, no step was lost, and every journal audits clean.

The kill delays come from a seeded generator (``STEAD_CHAOS_SEED`` replays them).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from stead import Kind, Runtime, load_spec
from stead.integrity.audit import audit
from stead.store.postgres import PostgresStore
from tests.postgres import fresh_schema, url_for

from .cli_helpers import write_spec
from .test_postgres_cluster import PostgresCli

pytestmark = pytest.mark.chaos

AGENTS = 12
DECISIONS = 1500
KILLS_WANTED = 200
KILL_EVERY = (0.15, 0.45)  # seconds between kills
WORKER = ("work", "--forever", "--poll", "0.2", "--lease-ttl", "1", "--concurrency", "4",
          "--no-hibernate")  # fmt: skip


def test_two_hundred_kills_across_three_workers_lose_nothing_and_repeat_nothing(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("STEAD_CHAOS_SEED", random.randrange(2**32)))
    print(f"STEAD_CHAOS_SEED={seed}")
    rng = random.Random(seed)
    with fresh_schema() as schema:
        cli = PostgresCli(tmp_path, url_for(schema), STEAD_TEST_PAUSE="0.01")
        script = [
            {"tool": "append_reconciled" if n % 2 else "append_idempotent", "args": {"n": n}}
            for n in range(DECISIONS)
        ] + [{"finish": "done"}]
        spec = load_spec(
            write_spec(tmp_path / "spec", script, limits={"max_steps": DECISIONS + 10})
        )
        rt = Runtime(PostgresStore(cli.url), cli.data_dir)
        agents = [rt.create(spec).agent_id for _ in range(AGENTS)]

        def done() -> bool:
            return all(rt.store.load_state(a).is_final for a in agents)

        workers: list[subprocess.Popen[bytes]] = [cli.popen(*WORKER) for _ in range(3)]
        kills = 0
        try:
            while kills < KILLS_WANTED:
                time.sleep(rng.uniform(*KILL_EVERY))
                assert not done(), f"the agents finished after {kills} kills: give them more work"
                i = rng.randrange(len(workers))
                workers[i].send_signal(signal.SIGKILL)
                workers[i].communicate(timeout=30)
                kills += 1
                workers[i] = cli.popen(*WORKER)
            deadline = time.monotonic() + 300
            while not done() and time.monotonic() < deadline:
                time.sleep(0.5)
            states = {a: rt.store.load_state(a) for a in agents}
            assert all(s.status == "completed" for s in states.values()), {
                a: (s.status, s.status_reason) for a, s in states.items()
            }
        finally:
            for w in workers:
                w.send_signal(signal.SIGKILL)
                w.communicate(timeout=30)

        lines = Counter(cli.ledger_lines())
        assert all(n == 1 for n in lines.values()), "an effect happened twice"
        per_agent = DECISIONS // 2
        assert sum(1 for line in lines if line.startswith("R ")) == AGENTS * per_agent
        assert sum(1 for line in lines if line.startswith("I ")) == AGENTS * per_agent
        activations = 0
        for agent_id in agents:
            assert audit(rt.store, agent_id).ok
            events = list(rt.store.read_events(agent_id))
            steps = [e.data["step"] for e in events if e.kind == Kind.DECISION]
            assert steps == list(range(1, DECISIONS + 2))  # no step lost, none twice
            activations += sum(1 for e in events if e.kind == "activation_started")
        assert activations > AGENTS  # the kills did cut activations short
        rt.close()
