"""PostgreSQL's group commit and claims are set-based: the statements a commit sends
do not grow with the number of agents in it, and a claimed agent's lease is written
once, by the claim."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.conformance.test_group_commit import next_batch
from tests.conformance.test_store_conformance import T0, TTL, create
from tests.postgres import fresh_schema, url_for
from tests.store.test_postgres_claims import made

from stead import FakeClock, Runtime
from stead.store.postgres import PostgresStore


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as schema:
        yield url_for(schema)


def statements_of(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the store's connections execute from now on."""
    sent: list[str] = []
    execute = psycopg.Connection.execute

    def traced(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", traced)
    return sent


def test_a_group_commit_sends_as_many_statements_for_many_agents_as_for_one(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresStore(url) as store:
        states = {f"ag_{n:02}": create(store, f"ag_{n:02}") for n in range(40)}
        epochs = {a: store.acquire_lease(a, "w", TTL, T0).epoch for a in states}
        sent = statements_of(monkeypatch)
        counts = []
        for agents, i in ((["ag_00"], 1), (sorted(states)[1:], 2)):
            sent.clear()
            batches = [next_batch(states[a], i, epochs[a], T0 + i) for a in agents]
            assert store.append_many(batches, T0 + i) == [None] * len(agents)
            counts.append(len(sent))
            for a, b in zip(agents, batches, strict=True):
                states[a] = b.state
                assert store.load_state(a).to_json() == b.state.to_json()
        assert counts[0] == counts[1] <= 5  # locked rows, epochs, one write (+ the transaction)


def test_a_claimed_agent_runs_under_the_epoch_its_claim_took(url: str, tmp_path: Path) -> None:
    """The claim writes the lease; the activation uses it and does not take it again."""
    rt = Runtime(PostgresStore(url), tmp_path / "data", clock=FakeClock())
    (agent_id,) = made(rt, tmp_path / "spec", 1)
    (lease,) = rt.store.claim("host:1:w", 30.0, rt.clock.now(), 1) or []
    assert lease.epoch == 1
    assert rt.run(agent_id, owner=lease).state.status == "completed"
    # before the claim every event is at epoch 0 (made without a lease)
    assert {e.epoch for e in rt.store.read_events(agent_id)} - {0} == {1}
    held = rt.store.get_lease(agent_id)
    assert held is not None and held.epoch == 1
    rt.close()


def test_a_claim_that_lapsed_before_its_activation_is_taken_again(url: str, tmp_path: Path) -> None:
    clock = FakeClock()
    rt = Runtime(PostgresStore(url), tmp_path / "data", clock=clock)
    (agent_id,) = made(rt, tmp_path / "spec", 1)
    (lease,) = rt.store.claim("host:1:w", 30.0, clock.now(), 1) or []
    clock.advance(25.0)  # its activation starts late: the claim is all but spent
    assert rt.run(agent_id, owner=lease).state.status == "completed"
    assert {e.epoch for e in rt.store.read_events(agent_id)} - {0} == {2}
    rt.close()
