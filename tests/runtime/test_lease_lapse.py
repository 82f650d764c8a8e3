"""A commit that waits past the lease must not be followed by the effect.

A worker's flush of a call's intent can block (a lock, a slow or cut-off link to
the store) for longer than its lease lasts; meanwhile another worker may claim
the lapsed lease and settle the call itself. Before the effect, the worker
renews its lease at the time now: a takeover raised the epoch, so the renewal
is refused and nothing acts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.errors import StaleEpoch
from stead.store.sqlite import SqliteStore
from stead.tools.base import as_tool, tool

DONE: list[str] = []


@tool(effect="effectful")
def transfer() -> str:
    """Move money."""
    DONE.append("moved")
    return "moved"


def test_an_effect_is_not_made_after_the_lease_lapsed_during_its_intents_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    DONE.clear()
    (tmp_path / "script.yaml").write_text(
        yaml.safe_dump([{"tool": "transfer"}, {"finish": "done"}]), encoding="utf-8"
    )
    clock = FakeClock()
    store = SqliteStore(tmp_path / "s.db")
    rt = Runtime(store, tmp_path / "data", clock=clock, lease_ttl=10.0)
    spec = parse_spec({"name": "t", "model": "scripted:script.yaml"}, tmp_path)
    agent_id = rt.create(spec).agent_id
    tools = {"transfer": as_tool(transfer)}
    real_append = store.append

    def slow_append(events: Any, *args: Any, **kwargs: Any) -> Any:
        out = real_append(events, *args, **kwargs)
        if any(e.kind == Kind.TOOL_INTENT for e in events):
            clock.advance(30)  # the commit took longer than the lease lasts...
            store.acquire_lease(agent_id, "elsewhere:1:x", 10.0, clock.now())  # ...taken over
        return out

    monkeypatch.setattr(store, "append", slow_append)
    with pytest.raises(StaleEpoch):
        rt.run(agent_id, tools=tools)
    assert DONE == []  # the intent is journaled; the effect was left to the new holder
    kinds = [e.kind for e in store.read_events(agent_id)]
    assert Kind.TOOL_INTENT in kinds and Kind.TOOL_RESULT not in kinds
    rt.close()
