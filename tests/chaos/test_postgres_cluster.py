"""Three workers on one PostgreSQL store, one of them killed mid-step.

Real ``stead work`` processes share a PostgreSQL store and the same agents;
one is SIGKILLed while it runs steps. Its agents' leases lapse and the other
workers claim them and finish them: every agent completes, every effect in
the ledger outside the workspaces happened exactly once, and every journal
audits clean.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from stead import Runtime, load_spec
from stead.integrity.audit import audit
from stead.store.postgres import PostgresStore
from tests.needs import missing
from tests.postgres import SERVER, fresh_schema, url_for

from .cli_helpers import Cli, write_spec
from .midwork import Cut, Watch, kill_measured, stop_where, taken_up_again, wait_busy

AGENTS = 9
DECISIONS = 16
WORKER = ("work", "--forever", "--poll", "1", "--lease-ttl", "2", "--concurrency", "3",
          "--no-hibernate")  # fmt: skip


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
        workers = [cli.popen(*WORKER) for _ in range(3)]
        watch = Watch.postgres(schema)
        try:
            # the first worker is inside activations when it is killed (a loaded machine
            # starts a worker slowly: it is waited for, not a fixed time), and the kill
            # counts only if it cut one short; a worker that ended its activations first
            # is replaced and waited for again
            cut: list[Cut] = []
            for attempt in range(5):
                if attempt:
                    workers[0] = cli.popen(*WORKER)
                assert wait_busy(workers[0], watch), workers[0].communicate()
                cut = kill_measured(workers[0], watch)
                if cut:
                    break
            assert cut, "the first worker was never killed inside an activation"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                states = [rt.store.load_state(a).status for a in agents]
                if all(s == "completed" for s in states):
                    break
                time.sleep(0.2)
            assert all(rt.store.load_state(a).status == "completed" for a in agents), states
        finally:
            watch.close()
            if workers[0].poll() is None:  # an assertion came before its kill
                workers[0].kill()
            for w in workers[1:]:
                w.send_signal(signal.SIGTERM)
            for w in workers:
                w.communicate(timeout=30)
        lines = Counter(cli.ledger_lines())
        assert len(lines) == AGENTS * DECISIONS
        assert all(n == 1 for n in lines.values()), "an effect happened twice"
        for agent_id in agents:
            assert audit(rt.store, agent_id).ok
        # each activation the kill cut short was taken over and finished by another worker
        for c in cut:
            assert taken_up_again(list(rt.store.read_events(c.agent_id)), c), c
        rt.close()


@pytest.mark.chaos
def test_a_worker_stopped_past_its_lease_writes_nothing_when_it_goes_on(tmp_path: Path) -> None:
    """SIGSTOP a worker inside a call until its lease lapses; another worker takes the
    agent over and finishes it; SIGCONT the first: the fencing epoch refuses its
    writes, none of them is journaled, and no effect happens twice."""
    with fresh_schema() as schema:
        cli = PostgresCli(tmp_path, url_for(schema))
        script = [{"tool": "slow_idempotent", "args": {"seconds": 0.4}} for _ in range(6)]
        spec = load_spec(write_spec(tmp_path / "spec", [*script, {"finish": "done"}]))
        rt = Runtime(PostgresStore(cli.url), cli.data_dir)
        agent_id = rt.create(spec).agent_id
        args = ("work", "--lease-ttl", "1", "--concurrency", "1", "--no-hibernate", "--json")
        # its sessions carry a name of their own, so the server tells which are its
        stopped_cli = PostgresCli(tmp_path, url_for(schema, application_name="stopped"))
        first = stopped_cli.popen(*args)
        try:
            deadline = time.monotonic() + 120  # a loaded machine starts a worker slowly
            while len([e for e in rt.store.read_events(agent_id) if e.kind == "tool_result"]) < 2:
                assert first.poll() is None, first.communicate()
                assert time.monotonic() < deadline, "the first worker made no two calls in 120 s"
                time.sleep(0.02)
            # stopped inside a later call (its intent journaled, its result not) and with no
            # transaction open at the server, so no row lock of it holds the second back:
            # the stop is placed by what the server and the journal show, not by a delay
            stop_where(
                first,
                "stopped",
                lambda open_, _: open_ == 0,
                also=lambda: bool(rt.store.load_state(agent_id).pending),
            )
            lease = rt.store.get_lease(agent_id)
            assert lease is not None
            stopped_epoch = lease.epoch
            time.sleep(max(0.0, lease.expires_at - time.time()) + 0.2)  # its lease lapses
            second = cli.run(*args, timeout=60)
            assert second.returncode == 0, second.stderr
            assert rt.store.load_state(agent_id).status == "completed"
            version = rt.store.load_state(agent_id).version
            first.send_signal(signal.SIGCONT)
            out, said = first.communicate(timeout=60)
            # it went on, tried to write, and was refused: nothing of it reached the journal
            assert rt.store.load_state(agent_id).version == version
            events = list(rt.store.read_events(agent_id))
            took_over = next(e.seq for e in events if e.epoch > stopped_epoch)
            assert all(e.epoch > stopped_epoch for e in events[took_over - 1 :])
            assert audit(rt.store, agent_id).ok
            lines = Counter(cli.ledger_lines())
            assert len(lines) == 6 and all(n == 1 for n in lines.values()), lines
            report = json.loads(out)  # its own report names the refusal
            assert "epoch" in report["errors"][agent_id], (report, said[-2000:])
        finally:
            if first.poll() is None:  # an assertion came first: it may be stopped
                first.send_signal(signal.SIGCONT)
                first.kill()
                first.communicate(timeout=30)
        rt.close()


def _restart_postgres() -> None:
    clusters = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True,
                              check=False)  # fmt: skip
    if clusters.returncode != 0 or not clusters.stdout.split():
        missing("no pg_ctlcluster here to restart PostgreSQL with", "manage its PostgreSQL")
    version, name = clusters.stdout.split()[:2]
    done = subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", "--mode", "fast",
                           version, name, "restart"], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    if done.returncode != 0:
        missing(f"cannot restart PostgreSQL here: {done.stderr.strip()}", "restart its PostgreSQL")


def _statuses(url: str, agents: list[str]) -> list[str]:
    """The agents' statuses, through a connection of its own (the server may be down)."""
    try:
        with psycopg.connect(SERVER, autocommit=True, connect_timeout=2) as db:
            schema = url.rpartition("schema=")[2]
            rows = db.execute(
                sql.SQL("SELECT agent_id, status FROM {}.agents").format(sql.Identifier(schema))
            ).fetchall()
    except psycopg.OperationalError:
        return []
    found = dict(rows)
    return [str(found.get(a)) for a in agents]


@pytest.mark.chaos
def test_a_postgresql_restart_mid_run_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    """The workers' connections die with the server; they wait for it, reconnect and go
    on: every agent completes, every effect exactly once, every journal audits clean."""
    schema = f"stead_test_{secrets.token_hex(6)}"
    url = url_for(schema)
    cli = PostgresCli(tmp_path, url, STEAD_TEST_PAUSE="0.1")
    script = [
        {"tool": "append_idempotent" if n % 2 else "append_reconciled", "args": {"n": n}}
        for n in range(DECISIONS)
    ] + [{"finish": "done"}]
    spec = load_spec(write_spec(tmp_path / "spec", script))
    rt = Runtime(PostgresStore(url), cli.data_dir)
    agents = [rt.create(spec).agent_id for _ in range(6)]
    rt.close()
    workers = [
        cli.popen("work", "--forever", "--poll", "0.5", "--lease-ttl", "2", "--concurrency", "3",
                  "--no-hibernate")
        for _ in range(2)
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "running" not in _statuses(url, agents):  # well into the agents' steps
            assert time.monotonic() < deadline, "no worker started an agent"
            time.sleep(0.05)
        _restart_postgres()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if _statuses(url, agents) == ["completed"] * len(agents):
                break
            time.sleep(0.3)
        assert _statuses(url, agents) == ["completed"] * len(agents)
        # and again while they are idle, looking for work twice a second: they find
        # the store gone, wait for it, and take the next agent when it is back
        _restart_postgres()
        time.sleep(1.0)
        rt = Runtime(PostgresStore(url), cli.data_dir)
        agents.append(rt.create(spec).agent_id)
        rt.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _statuses(url, agents)[-1] != "completed":
            time.sleep(0.3)
        assert _statuses(url, agents) == ["completed"] * len(agents)
        assert [w.poll() for w in workers] == [None, None]  # they rode it out
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            w.communicate(timeout=30)
    lines = Counter(cli.ledger_lines())
    assert len(lines) == 7 * DECISIONS and all(n == 1 for n in lines.values()), lines
    store = PostgresStore(url)
    try:
        cut = 0
        for agent_id in agents:
            assert audit(store, agent_id).ok
            starts = [e for e in store.read_events(agent_id) if e.kind == "activation_started"]
            cut += len(starts) > 1
        assert cut >= 1, "no activation met the restart: restart earlier"
    finally:
        store.close()
        with psycopg.connect(SERVER, autocommit=True) as db:
            db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
