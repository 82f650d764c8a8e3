"""The worker: many agents at once, their commits grouped, each agent's history intact."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from stead import Runtime, StaleEpoch, SystemClock, parse_spec
from stead.integrity.audit import audit
from stead.journal import NewEvent, seal
from stead.state import fold
from stead.store.base import AgentRecord, Batch, Store
from stead.store.memory import MemoryStore
from stead.store.sqlite import SqliteStore
from stead.workers.threaded import Worker
from tests.postgres import postgres_store


def make_agents(rt: Runtime, tmp_path: Path, count: int, steps: int) -> list[str]:
    script = [
        {
            "actions": [
                {"tool": "write_file", "args": {"path": f"f{n}.txt", "content": str(n)}},
                {"remember": {"n": n}},
            ]
        }
        for n in range(steps)
    ] + [{"finish": "done"}]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec(
        {"name": "w", "model": "scripted:script.yaml", "tools": ["write_file"]}, tmp_path
    )
    return [rt.create(spec).agent_id for _ in range(count)]


@contextmanager
def store_of(backend: str, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of ``backend``, closed (and a PostgreSQL schema dropped) afterwards."""
    if backend == "postgres":
        with postgres_store() as pg:
            yield pg
        return
    with MemoryStore() if backend == "memory" else SqliteStore(tmp_path / "s.db") as store:
        yield store


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_the_worker_runs_every_agent_to_the_end(tmp_path: Path, backend: str) -> None:
    with store_of(backend, tmp_path) as store:
        run_every_agent_to_the_end(Runtime(store, tmp_path / "data", clock=SystemClock()), tmp_path)


def run_every_agent_to_the_end(rt: Runtime, tmp_path: Path) -> None:
    agents = make_agents(rt, tmp_path, count=24, steps=5)
    report = Worker(rt, concurrency=8).run_until_idle()
    assert report.ran == dict.fromkeys(agents, "completed")
    assert report.steps == 24 * 6 and not report.errors and not report.busy
    assert report.batches >= 24 * 6
    for agent in agents:
        state = rt.store.load_state(agent)
        assert state.memory == {"n": 4}
        assert sorted(state.manifest) == [f"f{n}.txt" for n in range(5)]
        assert audit(rt.store, agent).ok
    # a second pass finds nothing to do
    assert Worker(rt, concurrency=8).run_until_idle().ran == {}
    rt.close()


def test_group_commit_puts_many_agents_in_one_transaction(tmp_path: Path) -> None:
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=SystemClock())
    make_agents(rt, tmp_path, count=40, steps=10)
    report = Worker(rt, concurrency=16).run_until_idle()
    assert report.commits < report.batches, "some commits carried several agents' steps"
    rt.close()


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_append_many_stores_good_batches_and_reports_bad_ones(tmp_path: Path, backend: str) -> None:
    with store_of(backend, tmp_path) as store:
        good_batches_stored_bad_ones_reported(store)


def good_batches_stored_bad_ones_reported(store: Store) -> None:
    states = {}
    for name in ("a", "b", "c"):
        rec = AgentRecord(f"ag_{name}", "default", name, {}, 1.0)
        states[name] = store.create_agent(
            rec, [NewEvent("agent_created", {"tenant": "default", "name": name})], 1.0
        )
    store.acquire_lease("ag_b", "w", 30, 1.0)  # b's epoch is now 1: a write at 0 is stale

    def batch(name: str) -> Batch:
        st = states[name]
        evs = seal(
            st.agent_id,
            2,
            st.head_hash,
            2.0,
            0,
            [NewEvent("memory_written", {"values": {"x": name}})],
        )
        return Batch(evs, fold(evs, st), 1, 0)

    results = store.append_many([batch("a"), batch("b"), batch("c")], 2.0)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StaleEpoch)
    assert store.load_state("ag_a").memory == {"x": "a"}
    assert store.load_state("ag_c").memory == {"x": "c"}
    assert store.load_state("ag_b").version == 1
    assert [e.seq for e in store.read_events("ag_b")] == [1]
