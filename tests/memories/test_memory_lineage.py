"""What memories do when an agent is hibernated, forked or deleted (docs/guide/memories.md)."""

from __future__ import annotations

from pathlib import Path

from stead import FakeClock
from stead.memories import Memories
from stead.memories.access import rows_of

from ..governance.agents import runtime_at
from .test_poisoned_memory import agent


def test_a_fork_starts_without_its_parents_memories_and_deletion_takes_them(
    tmp_path: Path,
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    parent = agent(rt, tmp_path / "p", "parent", [{"wait_for_input": "?"}])
    rt.run(parent)
    memories = Memories(rt)
    memories.add(parent, "the parent's own note")
    memories.add(parent, "the team's shared note", shared=True)
    rt.hibernate(parent)  # rows stay: hibernation changes nothing
    assert sorted(m.text for m in memories.list(parent)) == [
        "the parent's own note", "the team's shared note"]  # fmt: skip
    rt.wake(parent)
    child = rt.fork(parent).agent_id
    assert [m.text for m in memories.list(child)] == ["the team's shared note"]
    rt.cancel(parent, "done with it")
    rt.store.delete_agent(parent, rt.clock.now())
    assert [m.text for m in memories.list(child)] == ["the team's shared note"]
    assert rows_of(rt.store).list_memories("default", [parent]) == []
    rt.close()
