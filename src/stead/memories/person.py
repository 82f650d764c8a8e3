"""What a person does with an agent's long-term memories, each change journaled.

:func:`add`, :func:`correct` and :func:`forget` write the row and append the
event that says so (``memory_saved``, ``memory_corrected``,
``memory_forgotten``, with who did it) to the agent's journal, under a short
lease of the agent (:meth:`Runtime.append_as_person`): the row is written
inside it, and put back as it was if the event cannot be committed. A memory a
person writes or corrects is the person's (source ``person``).

The agent is looked up through the runtime's tenant view, so a person reaches
only their own tenant's agents, and through them only that tenant's memories.
"""

from __future__ import annotations

import builtins
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import SpecError
from ..journal import Kind, NewEvent
from ..models.registry import effective_spec, model_for
from ..store.memory_rows import SHARED, MemoryRow
from .access import mark_of, rows_of
from .book import Book, digest, text_of
from .embedders import HashEmbedder, embedder_for
from .search import Found

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime
    from ..state import State


def book_for(rt: Runtime, agent_id: str) -> Book:
    """The agent's memories as a person sees them (shared ones included)."""
    record = rt.store.get_record(agent_id)  # the tenant's view: another's is NotFound
    state = rt.store.load_state(agent_id)
    try:
        model: Any = model_for(effective_spec(record.spec, state), rt.model_key(record))
        embedder = embedder_for(model)
    except SpecError:  # a model only its program gives: the offline embedder
        embedder = HashEmbedder()
    rows = rows_of(rt.store)
    return Book(rows, record.tenant, agent_id, embedder, rt.clock, True, True, mark_of(rt.vault))


def _shown(row: MemoryRow) -> dict[str, Any]:
    return {"memory_id": row.memory_id, "shared": row.owner == SHARED,
            "source": row.source, "digest": digest(row.text)}  # fmt: skip


def add(rt: Runtime, agent_id: str, text: str, *, shared: bool = False) -> MemoryRow:
    """Save a memory a person wrote (the agent's, or its tenant's shared one)."""
    book, by = book_for(rt, agent_id), rt.person()
    saved: list[MemoryRow] = []
    # asked before the lease is taken: the agent is not held while a service answers
    (vector,) = book.embedder.embed([text_of(text)])

    def build(state: State) -> list[NewEvent]:
        row = book.save(text, "person", by=by, provenance={"by": by}, shared=shared,
                        vector=vector)  # fmt: skip
        saved.append(row)
        return [NewEvent(Kind.MEMORY_SAVED, {**_shown(row), "text": row.text, "by": by})]

    try:
        rt.append_as_person(agent_id, build)
    except BaseException:
        for row in saved:  # the event is not in the journal: neither is the memory
            book.rows.forget_memory(row.tenant, row.memory_id, rt.clock.now())
        raise
    return saved[0]


def correct(rt: Runtime, agent_id: str, memory_id: str, text: str) -> MemoryRow:
    """A person's new text for a memory; it is the person's from now on."""
    book, by = book_for(rt, agent_id), rt.person()
    done: list[tuple[MemoryRow, MemoryRow]] = []
    (vector,) = book.embedder.embed([text_of(text)])

    def build(state: State) -> list[NewEvent]:
        old, new = book.correct(memory_id, text, by=by, vector=vector)
        done.append((old, new))
        return [NewEvent(Kind.MEMORY_CORRECTED, {**_shown(new), "text": new.text, "by": by,
                                                 "was": {"digest": digest(old.text),
                                                         "source": old.source}})]  # fmt: skip

    try:
        rt.append_as_person(agent_id, build)
    except BaseException:
        for old, _ in done:  # put the old text back: the journal does not have the new
            full = book.rows.get_memory(old.tenant, old.memory_id)
            if full is not None:
                (vector,) = book.embedder.embed([old.text])
                book.rows.put_memory(replace(old, vector=vector, embedder=book.embedder.name))
        raise
    return done[0][1]


def forget(rt: Runtime, agent_id: str, memory_id: str) -> MemoryRow:
    """Erase a memory's text and vector; the journal says who did, and when."""
    book, by = book_for(rt, agent_id), rt.person()
    gone: list[MemoryRow] = []

    def build(state: State) -> list[NewEvent]:
        book.get(memory_id)  # the agent's or shared, before anything changes
        return [NewEvent(Kind.MEMORY_FORGOTTEN, {**_shown(book.get(memory_id)), "by": by})]

    rt.append_as_person(agent_id, build)  # journaled first: a row is never erased unsaid
    gone.append(book.forget(memory_id))
    return gone[0]


def listed(rt: Runtime, agent_id: str) -> list[MemoryRow]:
    """The agent's memories and its tenant's shared ones, oldest first."""
    return book_for(rt, agent_id).list()


class Memories:
    """A person's view of agents' long-term memories, through a runtime (and its
    tenant): ``Memories(rt).add(agent_id, "text")``. Every change is journaled on
    the agent with who made it (:meth:`Runtime.person`)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def list(self, agent_id: str) -> list[MemoryRow]:
        """The agent's memories and its tenant's shared ones, oldest first."""
        return listed(self.rt, agent_id)

    def add(self, agent_id: str, text: str, *, shared: bool = False) -> MemoryRow:
        """Save a memory the person wrote (``shared``: the tenant's shared memory)."""
        return add(self.rt, agent_id, text, shared=shared)

    def correct(self, agent_id: str, memory_id: str, text: str) -> MemoryRow:
        """Replace a memory's text; the person's from now on."""
        return correct(self.rt, agent_id, memory_id, text)

    def forget(self, agent_id: str, memory_id: str) -> MemoryRow:
        """Erase a memory's text and vector."""
        return forget(self.rt, agent_id, memory_id)

    def recall(self, agent_id: str, query: str, k: int = 5) -> builtins.list[Found]:
        """What the agent would recall for ``query`` (shared memories included)."""
        return book_for(self.rt, agent_id).recall(query, k, shared=True)
