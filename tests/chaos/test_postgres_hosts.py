"""Three hosts on one PostgreSQL store: one killed mid-step, one cut off and restored.

Each worker is a real ``stead work`` process on a host of its own: a network
namespace whose only way to the store is its veth link and a forwarder on the
machine's side of it (see :mod:`tests.chaos.netns`), with a host name of its
own, so a worker cannot tell that a holder on "its" host is dead and take over at
once: it waits the lease out, as across machines. The forwarders record where
every connection came from, so each test also shows that every worker reached
the store from its own host and by no other way.

The link of the host that is cut off goes down at a moment chosen through
``pg_stat_activity`` (the worker is held with SIGSTOP while it is looked at, until
the server's view of it has settled): between two of its transactions, or inside
one, whose row locks the
server frees once the session has sat idle in it for
``idle_in_transaction_session_timeout`` (5 s, stead's default for every session),
after which the others claim its agents.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from stead import Kind, Runtime, load_spec
from stead.integrity.audit import audit
from stead.journal import Event
from stead.spec import AgentSpec
from stead.store.postgres import PostgresStore
from tests.postgres import SERVER, fresh_schema, url_for

from .cli_helpers import write_spec
from .midwork import stop, stop_where
from .netns import Host, hosts
from .test_postgres_cluster import PostgresCli

pytestmark = pytest.mark.chaos

LEASE_TTL = 1.0
WORKER = ("work", "--forever", "--poll", "0.2", "--lease-ttl", str(LEASE_TTL), "--concurrency",
          "3", "--no-hibernate", "--json")  # fmt: skip
PAUSE = "0.05"  # before and after each ledger write: a step is mostly inside its call
CUT_FOR = 4.0  # seconds host 2 is off the network at least: four lease lifetimes
# and at most, waiting for hosts 1 and 3 to take all its agents over: a worker claims
# lapsed agents only between passes, when every activation it runs has ended, so the
# last agent whose lease lapses waits for the shortest of their current activations;
# cut inside a transaction, host 2's rows stay locked for the server's 5 s before that
TAKEOVER_WITHIN = 15.0
# seconds for workers to start and take agents: a bound for a hang, not a pace (a loaded
# machine takes seconds to start one)
STARTED_WITHIN = 120.0
FINISHED_WITHIN = 120.0  # seconds for the hosts left to finish every agent: a bound too

_SERVER = conninfo_to_dict(SERVER)
_TARGET = (str(_SERVER.get("host") or "127.0.0.1"), int(_SERVER.get("port") or 5432))
_DBNAME = str(_SERVER.get("dbname") or "test")
_USER = str(_SERVER.get("user") or "postgres")


class Workers:
    """Starts ``stead work`` on hosts and ends every one still running afterwards."""

    def __init__(self, root: Path, schema: str) -> None:
        self.root = root
        self.schema = schema
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._files: list[IO[bytes]] = []

    def start(self, host: Host) -> subprocess.Popen[bytes]:
        # its sessions carry the host's name, so pg_stat_activity tells whose they are
        url = host.store_url(_USER, _DBNAME, schema=self.schema, application_name=host.name)
        cli = PostgresCli(self.root, url, STEAD_TEST_PAUSE=PAUSE)
        out = open(self.root / f"{host.name}.out", "wb")  # noqa: SIM115 (closed in end())
        err = open(self.root / f"{host.name}.err", "wb")  # noqa: SIM115
        self._files += [out, err]
        proc = subprocess.Popen(
            host.command(cli.argv(*WORKER)), cwd=self.root, env=cli.env, stdout=out, stderr=err
        )
        self.procs[host.name] = proc
        return proc

    def said(self, host: Host) -> str:
        """The last of what the worker on ``host`` wrote to stderr."""
        path = self.root / f"{host.name}.err"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def report(self, host: Host) -> dict[str, Any]:
        """The ``--json`` report the worker on ``host`` printed when it stopped."""
        found: dict[str, Any] = json.loads((self.root / f"{host.name}.out").read_text())
        return found

    def stop(self, *on: Host) -> None:
        """SIGTERM the workers on ``on`` and wait for them to finish their activations."""
        for host in on:
            self.procs[host.name].send_signal(signal.SIGTERM)
        for host in on:
            self.procs[host.name].wait(timeout=30)

    def end(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a stopped one too
                proc.kill()
            proc.wait(timeout=30)
        for f in self._files:
            f.close()


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.fixture
def three_hosts() -> Iterator[list[Host]]:
    with hosts(3, _TARGET) as made:
        yield made


@pytest.fixture
def workers(tmp_path: Path, schema: str, three_hosts: list[Host]) -> Iterator[Workers]:
    """Set up after the schema and the hosts, so torn down before them: every worker is
    dead before its namespace goes and before its schema is dropped."""
    started = Workers(tmp_path, schema)
    try:
        yield started
    finally:
        started.end()


def _spec(folder: Path, decisions: int) -> AgentSpec:
    script = [
        {"tool": "append_idempotent" if n % 2 else "append_reconciled", "args": {"n": n}}
        for n in range(decisions)
    ] + [{"finish": "done"}]
    return load_spec(write_spec(folder, script))


def _wait(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    assert _wait(check, timeout), f"not within {timeout} s: {what}"


def _host_of(owner: str) -> str:
    return owner.partition(":")[0]


def _activations(events: list[Event]) -> list[Event]:
    return [e for e in events if e.kind == Kind.ACTIVATION_STARTED]


def _held_by(store: PostgresStore, agents: list[str], host: Host) -> dict[str, int]:
    """The agents ``host`` holds the lease of and has not finished: agent -> epoch."""
    held = {}
    for agent_id in agents:
        lease = store.get_lease(agent_id)
        if (
            lease is not None
            and _host_of(lease.owner) == host.name
            and store.load_state(agent_id).status != "completed"
        ):
            held[agent_id] = lease.epoch
    return held


def _running_on(store: PostgresStore, agents: list[str], host: Host) -> list[str]:
    """The agents ``host`` holds and is running steps of: its activation is journaled
    and a call of it has returned since."""
    running = []
    for agent_id, epoch in _held_by(store, agents, host).items():
        events = list(store.read_events(agent_id))
        started = [e for e in _activations(events) if e.epoch == epoch]
        if started and any(e.kind == Kind.TOOL_RESULT for e in events[started[0].seq :]):
            running.append(agent_id)
    return running


def _check_journal(store: PostgresStore, agent_id: str) -> list[Event]:
    """The agent completed, its journal audits clean and no write of an earlier holder
    landed after a later one's: epochs never go down along the journal."""
    assert store.load_state(agent_id).status == "completed"
    report = audit(store, agent_id)
    assert report.ok, report.reason
    events = list(store.read_events(agent_id))
    epochs = [e.epoch for e in events]
    assert epochs == sorted(epochs), f"{agent_id}: a stale holder's write landed: {epochs}"
    starts = [e.epoch for e in _activations(events)]
    assert starts == sorted(set(starts))  # each activation under a lease of its own
    return events


class EffectRepeated(AssertionError):
    """An effect in the ledger outside the store happened more than once."""


def _check_ledger(root: Path, effects: int) -> None:
    path = root / "outside" / "ledger.txt"
    counted = Counter(path.read_text(encoding="utf-8").splitlines() if path.exists() else [])
    twice = sorted(line for line, n in counted.items() if n > 1)
    if twice:
        raise EffectRepeated(f"effects that happened more than once: {twice}")
    assert len(counted) == effects, f"{len(counted)} effects, wanted {effects}"


def _hosts_that_ran(hosts_: list[Host], events: list[list[Event]]) -> set[str]:
    """Each worker spoke to the store from its own namespace (its forwarder saw it come
    from the host's address, and from nowhere else) and named its leases with its own
    host name: the names of the hosts that ran activations of these agents."""
    for host in hosts_:
        assert host.peers() == {host.inside}, (host.name, host.peers())
    names = {_host_of(e.data["worker"]) for es in events for e in _activations(es)}
    assert names <= {h.name for h in hosts_}, names
    return names


def test_three_hosts_one_killed_mid_step_its_agents_finish_on_the_others_exactly_once(
    tmp_path: Path, schema: str, three_hosts: list[Host], workers: Workers
) -> None:
    agents_n, decisions = 9, 16
    store = PostgresStore(url_for(schema))
    rt = Runtime(store, tmp_path / "data")
    try:
        spec = _spec(tmp_path / "spec", decisions)
        # the agents are made once every worker looks for work: a worker that a loaded
        # machine started late would otherwise find them all taken
        for host in three_hosts:
            workers.start(host)
        _until(lambda: _listening(three_hosts), STARTED_WITHIN, "every worker looking for work")
        agents = [rt.create(spec).agent_id for _ in range(agents_n)]
        victim, others = three_hosts[0], three_hosts[1:]

        def every_host_is_mid_run() -> bool:
            return all(_running_on(store, agents, h) for h in three_hosts)

        _until(every_host_is_mid_run, STARTED_WITHIN, "every host holding agents it is running")
        # what it holds is read while it is stopped (it can renew nothing more), then
        # it is killed: its leases outlive it, until they lapse
        stop(workers.procs[victim.name])
        held = _held_by(store, agents, victim)
        lapse = {a: store.get_lease(a).expires_at for a in held}  # type: ignore[union-attr]
        workers.procs[victim.name].kill()
        workers.procs[victim.name].wait(timeout=30)
        assert held, "the killed worker held no agent any more: kill it earlier"

        def all_done() -> bool:
            return all(store.load_state(a).status == "completed" for a in agents)

        _until(all_done, FINISHED_WITHIN, "every agent completed on the two hosts left")
        workers.stop(*others)

        _check_ledger(tmp_path, agents_n * decisions)
        journals = [_check_journal(store, a) for a in agents]
        for agent_id, epoch in held.items():
            later = [e for e in _activations(list(store.read_events(agent_id))) if e.epoch > epoch]
            assert later, f"{agent_id} was never taken over from the killed host"
            assert _host_of(later[0].data["worker"]) in {h.name for h in others}
            # waited out: no other host can tell that the holder is dead
            assert later[0].at >= lapse[agent_id], (later[0].at, lapse[agent_id])
        assert _hosts_that_ran(three_hosts, journals) == {h.name for h in three_hosts}
    finally:
        rt.close()


def _inside(open_: int, writing: int) -> bool:
    """A transaction that has locked or written rows is open, waiting for the worker."""
    return writing > 0


def _outside(open_: int, writing: int) -> bool:
    """No transaction of the worker's is open at the server."""
    return open_ == 0


def _listening(hosts_: list[Host]) -> bool:
    """Whether the worker on each of ``hosts_`` waits for work (LISTENs on its store's
    channel): past its start-up, looking for agents to run."""
    with psycopg.connect(SERVER, autocommit=True) as db:
        rows = db.execute(
            "SELECT DISTINCT application_name FROM pg_stat_activity "
            "WHERE application_name = ANY(%s) AND query LIKE 'LISTEN %%'",
            ([h.name for h in hosts_],),
        ).fetchall()
    return len(rows) == len(hosts_)


def _waiting_for_locks(apps: list[str]) -> int:
    """How many sessions of ``apps`` wait for a lock."""
    with psycopg.connect(SERVER, autocommit=True) as db:
        row = db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY(%s) "
            "AND wait_event_type = 'Lock'",
            (apps,),
        ).fetchone()
    return int(row[0]) if row else 0


class NotTakenOver(Exception):
    """Host 2's agents were not all taken over while it was cut off."""


@pytest.mark.parametrize(
    "in_transaction",
    [
        pytest.param(False, id="between-transactions"),
        pytest.param(True, id="inside-a-transaction"),
    ],
)
def test_a_host_cut_off_past_its_leases_is_fenced_off_and_rejoins_without_a_duplicate(
    tmp_path: Path,
    schema: str,
    three_hosts: list[Host],
    workers: Workers,
    in_transaction: bool,
) -> None:
    """Host 2's link goes down while it runs three agents, for four lease lifetimes or
    until hosts 1 and 3 have taken all of them over; they finish them. When host 2
    reaches the store again, its writes are refused by the fencing epoch (nothing of
    it is journaled after a takeover), it goes on running, and with the others stopped
    it runs a new agent. No effect happens twice; every journal audits clean."""
    decisions = 30
    store = PostgresStore(url_for(schema))
    rt = Runtime(store, tmp_path / "data")
    try:
        spec = _spec(tmp_path / "spec", decisions)
        one, cut, three = three_hosts
        # hosts 1 and 3 first, stopped once they look for work (with no transaction
        # open): host 2 takes every agent, and they are past their start-up when it is
        # cut off, however slowly a loaded machine started them
        for host in (one, three):
            workers.start(host)
        _until(lambda: _listening([one, three]), STARTED_WITHIN, "hosts 1 and 3 looking for work")
        for host in (one, three):
            stop_where(workers.procs[host.name], host.name, _outside)
        try:
            agents = [rt.create(spec).agent_id for _ in range(3)]
            on_cut = workers.start(cut)

            def cut_host_runs_them_all() -> bool:
                return len(_running_on(store, agents, cut)) == len(agents)

            _until(cut_host_runs_them_all, STARTED_WITHIN, "host 2 running all the agents")
        finally:
            for host in (one, three):
                workers.procs[host.name].send_signal(signal.SIGCONT)

        # inside or outside a transaction, as the server shows it
        stop_where(on_cut, cut.name, _inside if in_transaction else _outside)
        try:
            fenced = _held_by(store, agents, cut)
            assert set(fenced) == set(agents), fenced
            cut.cut()
        finally:
            on_cut.send_signal(signal.SIGCONT)  # stopped while it was looked at, no more
        cut_at = time.monotonic()
        try:

            def still_held() -> list[str]:
                held = []
                for agent_id, epoch in fenced.items():
                    lease = store.get_lease(agent_id)
                    done = store.load_state(agent_id).status == "completed"
                    if not done and (lease is None or lease.epoch <= epoch):
                        held.append(agent_id)
                return held

            in_time = _wait(lambda: not still_held(), TAKEOVER_WITHIN)
            not_taken = len(still_held())
            took = time.monotonic() - cut_at
            waiting = _waiting_for_locks([one.name, three.name])
            time.sleep(max(0.0, CUT_FOR - took))
        finally:
            cut.restore()
        back_at = time.monotonic()

        def all_done() -> bool:
            return all(store.load_state(a).status == "completed" for a in agents)

        _until(all_done, FINISHED_WITHIN, "every agent completed")
        # host 2 rejoins: with the others stopped, it alone can run a new agent
        workers.stop(one, three)
        assert on_cut.poll() is None, workers.said(cut)
        late = rt.create(_spec(tmp_path / "late", 4)).agent_id
        _until(
            lambda: store.load_state(late).status == "completed",
            30,
            f"host 2 running a new agent after its link is back: {workers.said(cut)}",
        )
        rejoined = time.monotonic() - back_at
        workers.stop(cut)

        _check_ledger(tmp_path, len(agents) * decisions + 4)
        journals = [_check_journal(store, a) for a in [*agents, late]]
        taken_from_cut = set()
        for agent_id, epoch in fenced.items():
            events = list(store.read_events(agent_id))
            took_over = next((e for e in events if e.epoch > epoch), None)
            if took_over is None:
                continue  # host 2 finished it itself (only when it was not taken over)
            taken_from_cut.add(agent_id)
            assert took_over.kind == Kind.ACTIVATION_STARTED
            assert _host_of(took_over.data["worker"]) in {one.name, three.name}
            after = events[took_over.seq - 1 :]
            assert all(e.epoch > epoch for e in after), "host 2 wrote after the takeover"
        assert [_host_of(e.data["worker"]) for e in _activations(journals[-1])] == [cut.name]
        assert cut.name in _hosts_that_ran(three_hosts, journals)
        # host 2 went on when it could reach the store, and its writes were refused
        errors = workers.report(cut)["errors"]
        assert taken_from_cut <= set(errors), (errors, workers.said(cut))
        # by the epoch, or (the writes it was cut off inside) by the server ending them
        ended = [a for a in taken_from_cut if "idle_in_transaction" in errors[a]]
        assert in_transaction or not ended, errors
        assert all("epoch" in errors[a] for a in set(taken_from_cut) - set(ended)), errors
        print(f"taken over {took:.1f} s into the cut; host 2 ran a new agent {rejoined:.1f} s "
              f"after its link was back; its refusals: {json.dumps(errors)}")  # fmt: skip
        if not in_time:
            raise NotTakenOver(
                f"{not_taken} of host 2's {len(fenced)} agents were "
                f"not taken over in {TAKEOVER_WITHIN} s of its cut; {waiting} sessions of "
                "hosts 1 and 3 were waiting for a lock"
            )
    finally:
        rt.close()
