"""A worker that dies in the middle of a save: the next one finishes the call and
the memory is saved once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind
from stead.memories import person
from stead.store.memory_rows import SqlMemoryRows

from .test_poisoned_memory import TOOLS, agent, runtime_at


class _Killed(BaseException):
    """The worker's process ends here (nothing after it runs)."""


def test_a_save_cut_short_after_its_row_is_finished_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent_id = agent(rt, tmp_path / "c", "crashing", [
        {"tool": "save_memory", "args": {"text": "the backup key is in the red binder"}},
        {"finish": "saved"},
    ])  # fmt: skip
    real = SqlMemoryRows.put_memory

    def dies_after_writing(self: Any, row: Any) -> int:
        real(self, row)
        raise _Killed  # after the row, before the result is journaled

    monkeypatch.setattr(SqlMemoryRows, "put_memory", dies_after_writing)
    with pytest.raises(_Killed):
        rt.run(agent_id, tools=TOOLS)
    monkeypatch.setattr(SqlMemoryRows, "put_memory", real)
    kinds = [e.kind for e in rt.store.read_events(agent_id)]
    assert Kind.TOOL_INTENT in kinds and Kind.TOOL_RESULT not in kinds
    clock.advance(60)  # its lease lapses; another worker takes the agent
    rt = runtime_at(tmp_path, clock)
    state = rt.run(agent_id, tools=TOOLS).state
    assert state.status == "completed", state.status_reason
    (saved,) = person.listed(rt, agent_id)
    assert saved.text == "the backup key is in the red binder"
    (result,) = [e for e in rt.store.read_events(agent_id) if e.kind == Kind.TOOL_RESULT]
    assert result.data["rerun"] is True and result.data["output"]["memory_id"] == saved.memory_id
    rt.close()
