"""At least 200 SIGKILLs that land mid-work, across three workers on one PostgreSQL store.

Three ``stead work`` processes run agents whose every decision calls an
effectful or idempotent tool that appends to a ledger outside the store (which
no restore can undo). Again and again one worker that is inside an activation,
picked at random, is SIGKILLed a random moment later and a new one started in
its place; its agents' leases are taken over and their work goes on. Afterwards
every agent has completed, every effect happened exactly once, no step was lost,
every journal audits clean, and each activation a kill cut short was taken up
again by a later one.

The kills are paced by what the workers visibly do, not by a clock: a worker
is killed only once it is inside an activation, and each kill counts only if
the store shows that it cut one short (see :mod:`tests.chaos.midwork`); a busy
machine gets slower kills, not kills that land before anything started. While
kills are still wanted, finished agents are replaced by new ones, so a fast
machine gets more agents rather than too few kills.

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

from .cli_helpers import go, write_spec
from .midwork import Cut, Watch, kill_measured, taken_up_again
from .test_postgres_cluster import PostgresCli

pytestmark = pytest.mark.chaos

AGENTS = 12  # kept unfinished while kills are wanted: the three workers' 12 slots
DECISIONS = 400
KILLS_WANTED = 200  # kills that cut at least one activation short
KILL_WITHIN = (0.0, 0.4)  # seconds after a worker is seen inside an activation
LOOP_BUDGET = 600.0  # seconds of killing before the test gives up, saying what it measured
FINISH_WITHIN = 300.0  # seconds for the last agents to complete once the kills stop
WORKER = ("work", "--forever", "--poll", "0.2", "--lease-ttl", "1", "--concurrency", "4",
          "--no-hibernate")  # fmt: skip


def test_two_hundred_kills_mid_work_across_three_workers_lose_nothing_and_repeat_nothing(
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
        watch = Watch.postgres(schema)

        workers: list[subprocess.Popen[bytes]] = [cli.popen(*WORKER) for _ in range(3)]
        # the next replacement, its imports done ahead (on a loaded machine they take
        # seconds, and the killed worker's agents would wait for them)
        spare = cli.standby(*WORKER)
        kills = 0  # every SIGKILL sent
        cuts: list[Cut] = []  # the activations they cut short
        landed = 0  # the kills that cut at least one
        started = time.monotonic()
        try:
            while landed < KILLS_WANTED:
                elapsed = time.monotonic() - started
                assert elapsed < LOOP_BUDGET, (
                    f"{landed} of {kills} kills landed mid-work in {elapsed:.0f} s, "
                    f"wanted {KILLS_WANTED} (seed {seed})"
                )
                for w in workers:
                    assert w.poll() is None, f"a worker exited {w.returncode}: {w.communicate()}"
                # work for the next kills: a fresh agent for each one that finished
                agents += [rt.create(spec).agent_id for _ in range(AGENTS - watch.unfinished())]
                busy = [w for w in workers if w.pid in watch.busy()]
                if not busy:  # every worker is starting, or between activations
                    time.sleep(0.02)
                    continue
                victim = rng.choice(busy)
                time.sleep(rng.uniform(*KILL_WITHIN))  # at any point of a step or a call
                cut = kill_measured(victim, watch)
                kills += 1
                landed += bool(cut)
                cuts += cut
                workers[workers.index(victim)] = go(spare)
                spare = cli.standby(*WORKER)
            loop_seconds = time.monotonic() - started

            def done() -> bool:
                return all(rt.store.load_state(a).is_final for a in agents)

            deadline = time.monotonic() + FINISH_WITHIN
            while not done() and time.monotonic() < deadline:
                time.sleep(0.5)
            states = {a: rt.store.load_state(a) for a in agents}
            assert all(s.status == "completed" for s in states.values()), {
                a: (s.status, s.status_reason) for a, s in states.items() if not s.is_final
            }
        finally:
            watch.close()
            for w in [*workers, spare]:
                w.send_signal(signal.SIGKILL)
                w.communicate(timeout=30)

        lines = Counter(cli.ledger_lines())
        assert all(n == 1 for n in lines.values()), "an effect happened twice"
        per_agent = DECISIONS // 2
        assert sum(1 for line in lines if line.startswith("R ")) == len(agents) * per_agent
        assert sum(1 for line in lines if line.startswith("I ")) == len(agents) * per_agent
        activations = 0
        cut_by_agent: dict[str, list[Cut]] = {}
        for cut in cuts:
            cut_by_agent.setdefault(cut.agent_id, []).append(cut)
        for agent_id in agents:
            assert audit(rt.store, agent_id).ok
            events = list(rt.store.read_events(agent_id))
            steps = [e.data["step"] for e in events if e.kind == Kind.DECISION]
            assert steps == list(range(1, DECISIONS + 2))  # no step lost, none twice
            activations += sum(1 for e in events if e.kind == Kind.ACTIVATION_STARTED)
            for cut in cut_by_agent.get(agent_id, []):
                assert taken_up_again(events, cut), f"{cut} was not taken up again"
        # each activation a kill cut short is one more than the agents would have needed
        assert activations >= len(agents) + len(cuts)
        print(
            f"{landed} of {kills} kills landed mid-work in {loop_seconds:.0f} s, cutting "
            f"{len(cuts)} activations short; the newest event then: "
            f"{dict(Counter(c.head for c in cuts))}; {len(agents)} agents, "
            f"{activations} activations"
        )
        rt.close()
