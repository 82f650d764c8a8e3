"""Three workers on one PostgreSQL store, one of them killed mid-step.

Real ``stead work`` processes share a PostgreSQL store and the same agents;
one is SIGKILLed while it runs steps. Its agents' leases lapse and the other
workers claim them and finish them: every agent completes, every effect in
the ledger outside the workspaces happened exactly once, and every journal
audits clean.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from stead import Runtime, load_spec
from stead.integrity.audit import audit
from stead.store.postgres import PostgresStore
from tests.postgres import fresh_schema, url_for

from .cli_helpers import Cli, write_spec

AGENTS = 9
DECISIONS = 16


class PostgresCli(Cli):
    def __init__(self, root: Path, url: str, **env: str) -> None:
        super().__init__(root, **env)
        self._url = url

    @property
    def url(self) -> str:
        return self._url


@pytest.mark.chaos
def test_a_killed_workers_agents_finish_on_the_others_exactly_once(tmp_path: Path) -> None:
    with fresh_schema() as schema:
        cli = PostgresCli(tmp_path, url_for(schema), STEAD_TEST_PAUSE="0.05")
        script = [
            {"tool": "append_idempotent" if n % 2 else "append_reconciled", "args": {"n": n}}
            for n in range(DECISIONS)
        ] + [{"finish": "done"}]
        spec = load_spec(write_spec(tmp_path / "spec", script))
        rt = Runtime(PostgresStore(cli.url), cli.data_dir)
        agents = [rt.create(spec).agent_id for _ in range(AGENTS)]
        workers = [
            cli.popen("work", "--forever", "--poll", "1", "--lease-ttl", "2",
                      "--concurrency", "3", "--no-hibernate")
            for _ in range(3)
        ]  # fmt: skip
        try:
            time.sleep(1.0)  # all three are well into their agents' steps
            workers[0].send_signal(signal.SIGKILL)
            workers[0].communicate(timeout=30)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                states = [rt.store.load_state(a).status for a in agents]
                if all(s == "completed" for s in states):
                    break
                time.sleep(0.2)
            assert all(rt.store.load_state(a).status == "completed" for a in agents), states
        finally:
            for w in workers[1:]:
                w.send_signal(signal.SIGTERM)
            for w in workers[1:]:
                w.communicate(timeout=30)
        lines = Counter(cli.ledger_lines())
        assert len(lines) == AGENTS * DECISIONS
        assert all(n == 1 for n in lines.values()), "an effect happened twice"
        taken_over = 0
        for agent_id in agents:
            assert audit(rt.store, agent_id).ok
            starts = [e for e in rt.store.read_events(agent_id) if e.kind == "activation_started"]
            taken_over += len(starts) > 1
        assert taken_over >= 1, "the killed worker held no agent: kill it earlier"
        rt.close()
