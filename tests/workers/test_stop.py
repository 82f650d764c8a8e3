"""SIGTERM: a worker ends each agent's step, gives its leases back and exits; the
agents go on from there under the next worker, with no step made twice.

Real ``stead work`` processes (threaded, and parked with ``--in-flight``) on a
PostgreSQL store, whose agents each have a long script of steps that take a
moment each (a tool that naps and appends to a ledger outside the store).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict

from stead import Kind, Runtime, parse_spec
from stead.integrity.audit import audit
from stead.spec import AgentSpec
from stead.store.postgres import PostgresStore
from tests.postgres import SERVER, fresh_schema, url_for

REPO = Path(__file__).resolve().parents[2]
STEPS = 200
TOOLS = """\
import os, time
import stead

@stead.tool(effect="effectful")
def nap(n: int) -> str:
    with open(os.environ["LEDGER"], "a") as f:
        f.write(f"{n}\\n")
    time.sleep(0.02)
    return "rested"
"""


ONCE_TOOLS = """\
import os, time
import stead

@stead.tool(effect="idempotent")
def nap(n: int, ctx: stead.ToolContext) -> str:
    path = os.environ["LEDGER"]
    done = open(path).read().split() if os.path.exists(path) else []
    if ctx.idempotency_key not in done:
        with open(path, "a") as f:
            f.write(ctx.idempotency_key + "\\n")
    time.sleep(0.02)
    return "rested"
"""


def worker(url: str, data: Path, ledger: Path, *flags: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env |= {"PYTHONPATH": str(REPO), "LEDGER": str(ledger), "STEAD_UNSANDBOXED": "1"}
    argv = [sys.executable, "-m", "stead", "work", "--forever", "--no-hibernate",
            "--store", url, "--data-dir", str(data), *flags]  # fmt: skip
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


WORKERS = [
    pytest.param(("--concurrency", "4"), id="threaded"),
    # a scripted model answers in the thread: one thread for each agent here
    pytest.param(("--in-flight", "4", "--concurrency", "3"), id="parked"),
]


def napper(tmp_path: Path, tools: str, steps: int, **spec: Any) -> AgentSpec:
    """The spec of an agent that naps ``steps`` times (the ``nap`` tool of ``tools``)."""
    (tmp_path / "naptools.py").write_text(tools, encoding="utf-8")
    script = [{"tool": "nap", "args": {"n": n}} for n in range(steps)] + [{"finish": "rested"}]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    return parse_spec({"name": "napper", "model": "scripted:script.yaml",
                       "tools": ["naptools:nap"], **spec}, tmp_path)  # fmt: skip


def wait_for(
    proc: subprocess.Popen[bytes], ready: Callable[[], bool], what: Callable[[], str]
) -> None:
    """Until ``ready()``; after 60 s (a loaded machine starts a worker slowly) kill the
    worker and fail with ``what`` and what it said."""
    deadline = time.monotonic() + 60
    while not ready():
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{what()} after 60 s; {proc.communicate()[1]!r}")
        time.sleep(0.05)


@pytest.mark.parametrize("flags", WORKERS)
def test_sigterm_ends_the_step_gives_the_leases_back_and_the_next_worker_goes_on(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    spec = napper(tmp_path, TOOLS, STEPS, limits={"max_steps": STEPS + 5})
    ledger, data = tmp_path / "ledger.txt", tmp_path / "data"
    with fresh_schema() as schema:
        url = url_for(schema)
        store = PostgresStore(url)
        rt = Runtime(store, data)
        agents = [rt.create(spec).agent_id for _ in range(3)]
        first = worker(url, data, ledger, *flags)
        try:
            wait_for(
                first,
                lambda: min(store.load_state(a).steps_completed for a in agents) >= 5,
                lambda: f"steps {[store.load_state(a).steps_completed for a in agents]}",
            )
            asked = time.monotonic()
            first.send_signal(signal.SIGTERM)
            _, said = first.communicate(timeout=30)
            took = time.monotonic() - asked
        finally:
            if first.poll() is None:
                first.kill()
        assert first.returncode == 0, said
        states = {a: store.load_state(a) for a in agents}
        # each ended the step it was in: running still, nothing in flight, far from done
        assert all(s.status == "running" and s.inflight is None for s in states.values()), {
            a: (s.status, s.inflight, s.steps_completed) for a, s in states.items()
        }
        assert all(s.steps_completed < STEPS for s in states.values()), took
        # and gave its lease back: no one waits the lease out
        assert all(store.get_lease(a).owner == "" for a in agents)  # type: ignore[union-attr]
        second = worker(url, data, ledger, *flags)
        try:
            wait_for(
                second,
                lambda: all(store.load_state(a).status == "completed" for a in agents),
                lambda: "not completed",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=30)
        for agent_id in agents:
            assert audit(store, agent_id).ok
            steps = [e.data["step"] for e in store.read_events(agent_id) if e.kind == Kind.DECISION]
            assert steps == list(range(1, STEPS + 2))
        # every nap happened once per agent: no step redone after the stop
        naps = Counter(ledger.read_text().split())
        assert naps == Counter({str(n): len(agents) for n in range(STEPS)})
        rt.close()


def _relay(listener: socket.socket, target: tuple[str, int], opened: list[socket.socket]) -> None:
    """Relay every connection ``listener`` accepts to ``target`` (until it is closed),
    keeping the sockets it opens in ``opened`` for the test to close."""

    def pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    while True:
        try:
            inside, _ = listener.accept()
        except OSError:
            return
        outside = socket.create_connection(target)
        opened += [inside, outside]
        for a, b in ((inside, outside), (outside, inside)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


def test_a_worker_started_before_its_store_is_up_waits_for_it(tmp_path: Path) -> None:
    """``stead work --forever`` whose store cannot be reached yet (the database starts
    after the workers) waits for it, then runs the agents made meanwhile."""
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"finish": "done"}]), "utf-8")
    spec = parse_spec({"name": "w", "model": "scripted:script.yaml"}, tmp_path)
    server = conninfo_to_dict(SERVER)
    target = (str(server.get("host") or "127.0.0.1"), int(server.get("port") or 5432))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free now; nothing listens there until the relay
    with fresh_schema() as schema:
        url = url_for(schema)
        rt = Runtime(PostgresStore(url), tmp_path / "data")
        made = rt.create(spec).agent_id
        away = url.replace(f"{target[0]}:{target[1]}", f"127.0.0.1:{port}")
        assert away != url
        w = worker(away, tmp_path / "data", tmp_path / "ledger", "--poll", "0.5")
        listener = None
        opened: list[socket.socket] = []
        try:
            time.sleep(2.0)
            assert w.poll() is None, w.communicate()[1]
            assert rt.store.load_state(made).status == "created"
            listener = socket.create_server(("127.0.0.1", port))
            threading.Thread(target=_relay, args=(listener, target, opened), daemon=True).start()
            deadline = time.monotonic() + 30
            while rt.store.load_state(made).status != "completed":
                assert time.monotonic() < deadline, "the worker never reached the store"
                time.sleep(0.1)
        finally:
            w.send_signal(signal.SIGTERM)
            _, said = w.communicate(timeout=30)
            if listener is not None:
                listener.close()
            for sock in opened:
                sock.close()
            rt.close()
        assert w.returncode == 0
        assert b"cannot be used yet" in said


@pytest.mark.parametrize("flags", WORKERS)
def test_a_worker_started_again_on_the_host_of_a_killed_one_takes_its_agents_at_once(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    """SIGKILL a worker holding 30 s leases and start another on the same host: it sees
    the holder's process is gone and takes the agents over before those leases lapse,
    as it does on SQLite; each nap still happens once."""
    spec = napper(tmp_path, ONCE_TOOLS, 40)
    ledger, data = tmp_path / "ledger.txt", tmp_path / "data"
    with fresh_schema() as schema:
        url = url_for(schema)
        store = PostgresStore(url)
        rt = Runtime(store, data)
        agents = [rt.create(spec).agent_id for _ in range(3)]
        first = worker(url, data, ledger, "--lease-ttl", "30", *flags)
        wait_for(
            first,
            lambda: min(store.load_state(a).steps_completed for a in agents) >= 3,
            lambda: "the first worker never ran its agents",
        )
        first.kill()
        first.communicate(timeout=30)
        held = {a: store.get_lease(a) for a in agents}
        assert all(lease is not None and f":{first.pid}:" in lease.owner
                   for lease in held.values()), held  # fmt: skip
        second = worker(url, data, ledger, "--lease-ttl", "30", *flags)
        try:
            wait_for(
                second,
                lambda: all(store.load_state(a).status == "completed" for a in agents),
                lambda: "not completed",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=30)
        for agent_id, lease in held.items():
            assert lease is not None
            starts = [e for e in store.read_events(agent_id) if e.kind == Kind.ACTIVATION_STARTED]
            assert len(starts) == 2 and starts[1].at < lease.expires_at, (starts, lease)
            assert audit(store, agent_id).ok
        naps = ledger.read_text().split()
        assert len(naps) == len(set(naps)) == len(agents) * 40
        rt.close()
