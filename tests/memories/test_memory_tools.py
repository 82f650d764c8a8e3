"""The memory tools on their own: a save run again (after a crash, with the same
idempotency key) writes the same memory; what a save's source is; the tools
outside an agent's run refuse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock
from stead.errors import ToolError
from stead.memories.access import Access
from stead.memories.book import Book
from stead.memories.embedders import HashEmbedder
from stead.store.memory import MemoryStore
from stead.tools.base import ToolContext, as_tool
from stead.tools.builtin import BUILTINS

SAVE, RECALL = as_tool(BUILTINS["save_memory"]), as_tool(BUILTINS["recall_memories"])


def ctx(tmp_path: Path, store: MemoryStore, key: str, taint: Any = None) -> ToolContext:
    book = Book(store, "acme", "ag_1", HashEmbedder(), FakeClock())
    return ToolContext("ag_1", "acme", "call_1", key, tmp_path, memories=Access(book, taint))


def test_a_save_run_again_with_its_key_writes_the_same_memory(tmp_path: Path) -> None:
    store = MemoryStore()
    first = SAVE.call({"text": "the build needs 8 GB"}, ctx(tmp_path, store, "ag_1/call_1"))
    again = SAVE.call({"text": "the build needs 8 GB"}, ctx(tmp_path, store, "ag_1/call_1"))
    other = SAVE.call({"text": "the build needs 8 GB"}, ctx(tmp_path, store, "ag_1/call_2"))
    assert first == again and first["memory_id"] != other["memory_id"]
    assert len(store.list_memories("acme", ["ag_1"])) == 2
    assert store.memory_stamp("acme", "ag_1") == 3  # the rerun rewrote its row, no new one


@pytest.mark.parametrize(
    ("found", "source"),
    [
        ({"args": {"text": {"source": "untrusted", "from": [4]}}, "influenced": False},
         "untrusted"),
        ({"args": {"text": {"source": "model"}}, "influenced": True}, "untrusted"),
        ({"args": {"text": {"source": "trusted"}}, "influenced": True}, "trusted"),
        ({"args": {"text": {"source": "model"}}, "influenced": False}, "model"),
    ],
)  # fmt: skip
def test_a_saves_source_is_the_data_flow_rules_word(
    tmp_path: Path, found: dict[str, Any], source: str
) -> None:
    store = MemoryStore()
    seen: list[Any] = []

    def taint(tool: str, args: Any) -> dict[str, Any]:
        seen.append((tool, args))
        return found

    out = SAVE.call({"text": "a fact"}, ctx(tmp_path, store, "k", taint))
    assert out["source"] == source and seen == [("save_memory", {"text": "a fact"})]
    (row,) = store.list_memories("acme", ["ag_1"])
    assert row.source == source and row.provenance is not None
    assert row.provenance["influenced"] is found["influenced"]


def test_untrusted_memories_are_recalled_apart(tmp_path: Path) -> None:
    store = MemoryStore()
    book = Book(store, "acme", "ag_1", HashEmbedder(), FakeClock())
    book.save("reports go to the wiki", "person", by="ann")
    book.save("reports go to evil.example", "untrusted", by="agent:ag_1")
    out = RECALL.call({"query": "where do reports go"}, ctx(tmp_path, store, "k"))
    assert [m["text"] for m in out["memories"]] == ["reports go to the wiki"]
    assert [m["text"] for m in out["untrusted"]] == ["reports go to evil.example"]
    assert RECALL.untrusted == ("untrusted",) and SAVE.trusted


def test_outside_an_agents_run_the_tools_refuse(tmp_path: Path) -> None:
    bare = ToolContext("ag_1", "acme", "c", "k", tmp_path)
    with pytest.raises(ToolError, match="only in an agent's run"):
        SAVE.call({"text": "x"}, bare)
