"""One agent's long-term memories: save, recall, correct, forget, list.

A :class:`Book` is opened for one tenant and one agent; what it reads and
writes is that tenant's, always (the rows are asked by tenant:
:mod:`stead.store.memory_rows`). The tenant's shared memories are reached only
when the book was opened with the right to (``shared_recall``,
``shared_save``: a live grant, :func:`shared_rights`). The book journals
nothing itself: the agent's tools and a person's commands do
(:mod:`.tools`, :mod:`.person`).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..canonical import dumps
from ..clock import Clock
from ..errors import GovernanceError, NotFound, UsageError
from ..governance.grants import allows
from ..ids import check_id, new_id
from ..store.memory_rows import SHARED, MemoryRow, MemoryRows
from .embedders import Embedder
from .search import Found, index_of

MAX_TEXT = 4_000
"""The longest memory or query, in characters: a memory is a fact, not a file."""
MAX_RECALLED = 20
"""The most memories one recall returns."""
SOURCES = ("person", "trusted", "model", "untrusted")
RECALL_SHARED = "recall_shared"
SAVE_SHARED = "save_shared"
"""The grants (on these names, as on a tool's) that open the tenant's shared memory."""


def shared_rights(grants: Mapping[str, Mapping[str, Any]], now: float) -> tuple[bool, bool]:
    """Whether live grants let the agent recall, and save to, its tenant's shared
    memory: grants of exactly these names (as for the network, no pattern such as
    ``*`` opens what other agents wrote, or lets this one write for them)."""

    def held(name: str) -> bool:
        return any(g.get("tool") == name and allows(g, name, {}, now) is None
                   for g in grants.values())  # fmt: skip

    return held(RECALL_SHARED), held(SAVE_SHARED)


def text_of(value: Any, what: str = "text") -> str:
    """``value`` as a memory's text (or a query): text of 1 to MAX_TEXT characters."""
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"a memory's {what} must be some text")
    if len(value) > MAX_TEXT:
        raise UsageError(
            f"a memory's {what} is {len(value)} characters; keep it under {MAX_TEXT} "
            "(save the fact, not the document)"
        )
    return value.strip()


def digest(text: str) -> str:
    """What the journal keeps to name a text it need not repeat."""
    return hashlib.sha256(text.encode()).hexdigest()


def derived_id(tenant: str, agent_id: str, key: str) -> str:
    """A memory id from an idempotency key: a save run again writes the same row."""
    return "mem_" + hashlib.sha256(f"{tenant}/{agent_id}/{key}".encode()).hexdigest()[:26]


Mark = Callable[[str, bytes], str]
"""The vault's HMAC (:meth:`stead.sandbox.secrets.Vault.mark`)."""


def sealed_part(row: MemoryRow) -> bytes:
    """What a memory's seal covers: its id, tenant, owner, text and source."""
    return dumps([row.memory_id, row.tenant, row.owner, row.text, row.source]).encode()


@dataclass(frozen=True, slots=True)
class Book:
    """One agent's memories, and its tenant's shared ones where it may.

    With ``mark`` (the vault's), every memory written is sealed, and one recalled
    whose seal does not hold (a row written or edited in the database without the
    vault key) is recalled as ``untrusted``, whatever its row says."""

    rows: MemoryRows
    tenant: str
    agent_id: str
    embedder: Embedder
    clock: Clock
    shared_recall: bool = False
    shared_save: bool = False
    mark: Mark | None = None

    def _sealed(self, row: MemoryRow) -> MemoryRow:
        return (
            row if self.mark is None else replace(row, seal=self.mark("memory", sealed_part(row)))
        )

    def _checked(self, row: MemoryRow) -> MemoryRow:
        """``row``, or, if its seal does not hold, the same text as ``untrusted``."""
        if self.mark is None or row.source == "untrusted":
            return row
        if hmac.compare_digest(row.seal, self.mark("memory", sealed_part(row))):
            return row
        why = {**(row.provenance or {}), "unsealed": f"its row said {row.source!r}"}
        return replace(row, source="untrusted", provenance=why)

    def _owner(self, shared: bool, saving: bool) -> str:
        if not shared:
            return self.agent_id
        if not (self.shared_save if saving else self.shared_recall):
            name = SAVE_SHARED if saving else RECALL_SHARED
            raise GovernanceError(
                f"agent {self.agent_id} may not {'save to' if saving else 'recall from'} its "
                f"tenant's shared memory: that needs a live grant on {name!r} "
                f"(stead grant {self.agent_id} {name})"
            )
        return SHARED

    def save(
        self,
        text: str,
        source: str,
        *,
        by: str,
        provenance: Mapping[str, Any] | None = None,
        shared: bool = False,
        memory_id: str | None = None,
        vector: bytes | None = None,
    ) -> MemoryRow:
        """Save a memory (``memory_id``: the one a save run again writes; ``vector``:
        its embedding, if asked for already)."""
        if source not in SOURCES:
            raise UsageError(f"a memory's source is one of {', '.join(SOURCES)}, not {source!r}")
        text = text_of(text)
        owner = self._owner(shared, saving=True)
        if vector is None:
            (vector,) = self.embedder.embed([text])
        now = self.clock.now()
        row = MemoryRow(
            memory_id=check_id(memory_id or new_id("mem", self.clock), "memory id"),
            tenant=self.tenant,
            owner=owner,
            text=text,
            source=source,
            embedder=self.embedder.name,
            vector=vector,
            provenance=dict(provenance or {}),
            made_by=by,
            made_at=now,
            changed_at=now,
        )
        row = self._sealed(row)
        try:
            changed = self.rows.put_memory(row)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return replace(row, changed=changed, vector=b"")

    def recall(self, query: str, k: int = 5, *, shared: bool = False) -> list[Found]:
        """The ``k`` memories nearest ``query``: the agent's, and the shared ones too
        with ``shared``."""
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_RECALLED:
            raise UsageError(
                f"recall at most {MAX_RECALLED} memories at once (k = 1..{MAX_RECALLED})"
            )
        query = text_of(query, "query")
        owners = [self.agent_id, *([self._owner(True, saving=False)] if shared else [])]
        (vector,) = self.embedder.embed([query])
        found = index_of(self.rows).search(self.tenant, owners, self.embedder.name, vector, k)
        return [Found(self._checked(f.row), f.score) for f in found]

    def get(self, memory_id: str) -> MemoryRow:
        """One memory the agent may see, or :class:`NotFound`."""
        row = self.rows.get_memory(self.tenant, check_id(memory_id, "memory id"))
        if row is None or row.owner not in (self.agent_id, SHARED):
            raise NotFound(
                f"no memory {memory_id} for agent {self.agent_id}; stead memories list shows them"
            )
        return row

    def correct(
        self, memory_id: str, text: str, *, by: str, vector: bytes | None = None
    ) -> tuple[MemoryRow, MemoryRow]:
        """A person's new text for a memory: theirs now (``person``). Old and new."""
        old = self.get(memory_id)
        text = text_of(text)
        if vector is None:
            (vector,) = self.embedder.embed([text])
        new = replace(
            old,
            text=text,
            source="person",
            vector=vector,
            embedder=self.embedder.name,
            provenance={"corrected_from": digest(old.text), "was": old.source},
            made_by=by,
            changed_at=self.clock.now(),
        )
        new = self._sealed(new)
        changed = self.rows.put_memory(new)
        return replace(old, vector=b""), replace(new, vector=b"", changed=changed)

    def forget(self, memory_id: str) -> MemoryRow:
        """Erase a memory (its text and vector). The memory as it was."""
        self.get(memory_id)
        gone = self.rows.forget_memory(self.tenant, memory_id, self.clock.now())
        if gone is None:
            raise NotFound(f"no memory {memory_id} for agent {self.agent_id}")
        return gone

    def list(self, *, shared: bool = True) -> list[MemoryRow]:
        """The agent's memories, and (``shared``) its tenant's shared ones, each as
        recall would see it (an unsealed one ``untrusted``)."""
        owners = [self.agent_id, *([SHARED] if shared else [])]
        return [self._checked(r) for r in self.rows.list_memories(self.tenant, owners)]
