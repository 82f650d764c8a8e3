"""A runtime with a vault for the model tests, and a check that what a model was
shown is what a resumed worker would show it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.runtime.context import Renderer
from stead.store.sqlite import SqliteStore
from stead.tools.registry import load_tools

VAULT_KEY = os.urandom(32)


def runtime(tmp_path: Path) -> Runtime:
    """A runtime on the SQLite store in ``tmp_path``, with a vault; a new one is a
    restarted worker."""
    return Runtime(
        SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock(), secret_key=VAULT_KEY
    )


class _Until:
    """A store seen as it was at ``seq``: what a worker resuming then would read."""

    def __init__(self, store: Any, seq: int) -> None:
        self.store, self.seq = store, seq

    def read_events(self, agent_id: str, start: int = 1) -> Any:
        return self.store.read_events(agent_id, start, self.seq)


def assert_resumes_render_the_same(rt: Runtime, agent_id: str, every: int = 1) -> None:
    """Before each (``every``-th) decision, a worker resuming from the journal would
    have rendered the very context whose hash the decision journaled."""
    decisions = [e for e in rt.store.read_events(agent_id) if e.kind == Kind.DECISION]
    record = rt.store.get_record(agent_id)
    tools = load_tools(record.spec["tools"], ["."])
    for d in decisions[::every]:
        before = rt.store.state_at(agent_id, d.seq - 1)
        renderer = Renderer(record.spec, tools)
        renderer.follow(_Until(rt.store, d.seq - 1), before)
        assert renderer.render(before).hash == d.data["context_hash"], d.seq


def provider_agent(
    rt: Runtime, tmp_path: Path, provider: str, url: str, key: str, **spec: Any
) -> str:
    """An agent of ``spec`` driven by ``provider``'s model at ``url`` (a fake server
    on 127.0.0.1), its API key ``key`` in the vault, bound to that host."""
    rt.vault().set("default", f"{provider.upper()}_API_KEY", key, to=["127.0.0.1"],
                   at=rt.clock.now())  # fmt: skip
    model = {"provider": provider, "name": "m-1", "base_url": url}
    return rt.create(parse_spec({**spec, "model": model}, tmp_path)).agent_id
