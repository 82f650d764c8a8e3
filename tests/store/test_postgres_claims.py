"""Workers claiming agents on one PostgreSQL store: each claim gets different agents.

``Store.claim`` locks agents with work ``FOR UPDATE SKIP LOCKED`` and takes their
leases in the same transaction, so workers claiming at the same moment never
get the same agent, and an agent another worker holds is left alone until its
lease lapses.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tests.postgres import fresh_schema, url_for

from stead import FakeClock, Runtime, parse_spec
from stead.store.postgres import PostgresStore
from stead.workers.threaded import Worker

AGENTS = 24


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as schema:
        yield url_for(schema)


def made(rt: Runtime, folder: Path, n: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.yaml").write_text(yaml.safe_dump([{"finish": "done"}]), encoding="utf-8")
    spec = parse_spec({"name": "c", "model": "scripted:script.yaml"}, folder)
    return [rt.create(spec).agent_id for _ in range(n)]


def test_workers_claiming_at_once_get_different_agents_and_all_of_them(
    url: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    rt = Runtime(PostgresStore(url), tmp_path / "data", clock=clock)
    agents = made(rt, tmp_path / "spec", AGENTS)
    stores = [PostgresStore(url) for _ in range(4)]
    gate = threading.Barrier(len(stores))
    got: dict[int, list[str]] = {}

    def claim(i: int) -> None:
        gate.wait()
        leases = stores[i].claim(f"host:{i}:w", 30.0, clock.now(), 10) or []
        got[i] = [lease.agent_id for lease in leases]

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [a for i in got for a in got[i]]
    assert len(claimed) == len(set(claimed)) == AGENTS  # no agent twice, none left out
    assert sorted(claimed) == sorted(agents)
    # each is held by its claimant now: a fifth claim finds nothing
    assert stores[0].claim("host:9:w", 30.0, clock.now(), 10) == []
    # until the leases lapse
    assert len(stores[0].claim("host:9:w", 30.0, clock.now() + 31, 100) or []) == AGENTS
    for s in stores:
        s.close()
    rt.close()


def test_a_claimed_agent_runs_under_the_claim_and_a_worker_claims_on_postgres(
    url: str, tmp_path: Path
) -> None:
    rt = Runtime(PostgresStore(url), tmp_path / "data", clock=FakeClock())
    agents = made(rt, tmp_path / "spec", 6)
    (lease,) = rt.store.claim("host:1:w", 30.0, rt.clock.now(), 1) or []
    assert rt.run(lease.agent_id, owner=lease.owner).state.status == "completed"
    report = Worker(rt, concurrency=2).run_until_idle()
    assert sorted(report.ran) == sorted(a for a in agents if a != lease.agent_id)
    assert report.busy == [] and report.errors == {}
    rt.close()


def test_other_stores_do_not_claim(tmp_path: Path) -> None:
    from stead.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    assert store.claim("host:1:w", 30.0, 0.0, 5) is None  # the worker falls back to leases
    store.close()
