"""SIGTERM: a worker ends each agent's step, gives its leases back and exits; the
agents go on from there under the next worker, with no step made twice.

Real ``stead work`` processes (threaded, and parked with ``--in-flight``) on a
PostgreSQL store, whose agents each have a long script of steps that take a
moment each (a tool that naps and appends to a ledger outside the store).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from stead import Kind, Runtime, parse_spec
from stead.integrity.audit import audit
from stead.store.postgres import PostgresStore
from tests.postgres import fresh_schema, url_for

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


def worker(url: str, data: Path, ledger: Path, *flags: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env |= {"PYTHONPATH": str(REPO), "LEDGER": str(ledger), "STEAD_UNSANDBOXED": "1"}
    argv = [sys.executable, "-m", "stead", "work", "--forever", "--no-hibernate",
            "--store", url, "--data-dir", str(data), *flags]  # fmt: skip
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(("--concurrency", "4"), id="threaded"),
        # a scripted model answers in the thread: one thread for each agent here
        pytest.param(("--in-flight", "4", "--concurrency", "3"), id="parked"),
    ],
)
def test_sigterm_ends_the_step_gives_the_leases_back_and_the_next_worker_goes_on(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    (tmp_path / "naptools.py").write_text(TOOLS, encoding="utf-8")
    script = [{"tool": "nap", "args": {"n": n}} for n in range(STEPS)] + [{"finish": "rested"}]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec(
        {"name": "napper", "model": "scripted:script.yaml", "tools": ["naptools:nap"],
         "limits": {"max_steps": STEPS + 5}},
        tmp_path,
    )  # fmt: skip
    ledger, data = tmp_path / "ledger.txt", tmp_path / "data"
    with fresh_schema() as schema:
        url = url_for(schema)
        store = PostgresStore(url)
        rt = Runtime(store, data)
        agents = [rt.create(spec).agent_id for _ in range(3)]
        first = worker(url, data, ledger, *flags)
        try:
            deadline = time.monotonic() + 60  # a loaded machine starts a worker slowly
            while min(store.load_state(a).steps_completed for a in agents) < 5:
                if time.monotonic() > deadline:
                    first.kill()
                    steps = [store.load_state(a).steps_completed for a in agents]
                    pytest.fail(f"steps {steps} after 60 s; {first.communicate()[1]!r}")
                time.sleep(0.05)
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
            deadline = time.monotonic() + 60
            while any(store.load_state(a).status != "completed" for a in agents):
                if time.monotonic() > deadline:
                    second.kill()
                    pytest.fail(f"not completed in 60 s: {second.communicate()[1]!r}")
                time.sleep(0.1)
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
