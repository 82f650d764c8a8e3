"""What the memory tools are given for one call: the agent's :class:`Book`, and
where a text to save came from.

Built by the runtime for the memory tools' calls only (:func:`access_for`), from
the activation: the agent's tenant and id (its record: never an argument), its
model (whose provider gives the embeddings), its live grants (the shared
memory) and its data-flow watch (what an argument owes to untrusted results).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import SecretError, UsageError
from ..store.memory_rows import MemoryRows
from .book import Book, Mark, shared_rights
from .embedders import embedder_for

MEMORY_TOOLS = ("save_memory", "recall_memories")

Taint = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]


def rows_of(store: object) -> MemoryRows:
    """The memory rows of ``store`` (a tenant's view is looked through)."""
    inner = getattr(store, "inner", store)
    if not isinstance(inner, MemoryRows):
        raise UsageError(f"{type(inner).__name__} keeps no memories")
    return inner


@dataclass(frozen=True, slots=True)
class Access:
    """The memory tools' view of the agent: its book and the data-flow watch."""

    book: Book
    taint: Taint | None = None

    def source_of(self, tool: str, text: str) -> tuple[str, dict[str, Any]]:
        """Where ``text`` came from, as the data-flow rule sees it, and why.

        ``untrusted`` when it repeats an untrusted result no person gave, and
        also when it was written while one was in the model's view (it may have
        been steered into paraphrasing it); ``trusted`` when all its values are a
        person's; ``model`` otherwise, and where no data flow is watched."""
        if self.taint is None:
            return "model", {"watched": False}
        found = self.taint(tool, {"text": text})
        arg = dict((found.get("args") or {}).get("text") or {})
        source = str(arg.get("source") or "model")
        influenced = bool(found.get("influenced"))
        if influenced and source != "trusted":
            source = "untrusted"
        why: dict[str, Any] = {"from": list(arg.get("from") or []), "influenced": influenced}
        return source, why


def mark_of(vault: Callable[[], Any] | None) -> Mark | None:
    """The vault's mark, when there is a vault key (else memories go unsealed)."""
    if vault is None:
        return None
    try:
        found: Mark = vault().mark
    except SecretError:  # no vault key here: nothing can be sealed, or checked
        return None
    return found


def access_for(act: Any, tool: Any) -> Access | None:
    """The memory tools' access for a call of ``tool`` in the activation ``act``
    (None for any other tool: no other tool reaches memories)."""
    if tool is None or getattr(tool, "name", None) not in MEMORY_TOOLS:
        return None
    recall, save = shared_rights(act.state.grants, act.clock.now())
    book = Book(
        rows_of(act.store),
        act.record.tenant,
        act.record.agent_id,
        embedder_for(act.model),
        act.clock,
        shared_recall=recall,
        shared_save=save,
        mark=mark_of(act.vault),
    )
    watch = act.watch
    return Access(book, None if watch is None else watch.taint_of)
