"""A runtime on each store backend, with a fake clock, and a way to simulate a crash."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Runtime, parse_spec
from stead.store.base import Store
from stead.store.memory import MemoryStore
from stead.store.sqlite import SqliteStore
from tests.postgres import postgres_store

LEASE_TTL = 10.0


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    with ExitStack() as cleanup:
        store: Store
        if request.param == "memory":
            store = MemoryStore()
        elif request.param == "sqlite":
            store = SqliteStore(tmp_path / "s.db")
        else:
            store = cleanup.enter_context(postgres_store())
        rt = Runtime(store, tmp_path / "data", clock=FakeClock(), lease_ttl=LEASE_TTL)
        yield rt
        rt.close()


def make_agent(
    rt: Runtime, tmp_path: Path, script: list[Any], tools: list[str] | None = None, **spec: Any
) -> str:
    """Create an agent from a script given as Python data; return its id."""
    import yaml

    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {
        "name": "t",
        "model": "scripted:script.yaml",
        "tools": tools if tools is not None else ["read_file", "write_file", "list_files"],
        # these tests run the agent with more tools than its spec lists; they are
        # about recovery, not scope (tests/governance covers scope)
        "scope": [{"tool": "*"}],
        **spec,
    }
    return rt.create(parse_spec(data, tmp_path)).agent_id


def expire_lease(rt: Runtime) -> None:
    """Let a dead activation's lease run out, as time would."""
    assert isinstance(rt.clock, FakeClock)
    rt.clock.advance(LEASE_TTL + 1)
