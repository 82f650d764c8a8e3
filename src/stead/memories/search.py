"""Exact top-k search over an owner's memories: every vector compared, none missed.

Vectors are normalised (:mod:`.vectors`), so the score is a dot product. With
numpy (the ``memory`` extra) an owner's vectors are one float32 matrix and a
search is one matrix-vector product and a partial sort; without it, plain
Python compares them one by one (correct, and slow past a few thousand).

A process keeps each owner's matrix (up to a bound, the least recently searched
dropped first) and keeps it current from the store: every
write to an owner's memories raises its ``changed`` count
(:meth:`~stead.store.memory_rows.MemoryRows.memory_stamp`, one indexed read
before each search), and the rows written since the count the matrix holds are
read and applied (:meth:`~stead.store.memory_rows.MemoryRows.memories_since`):
a new memory is appended (the matrix grows by doubling), a corrected one
replaced in place, a forgotten one masked. So a write from this process or any
other is seen by the next search, at the cost of the rows it wrote.
"""

from __future__ import annotations

import heapq
import importlib.util
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..store.memory_rows import MemoryRow, MemoryRows
from .vectors import unpack

HAVE_NUMPY = importlib.util.find_spec("numpy") is not None
MAX_CACHED_BYTES = 1 << 30
"""The vectors one index keeps in a process (1 GiB: 100,000 memories of 1,536
dimensions take 600 MiB); past it the least recently searched owners are dropped."""


@dataclass(frozen=True, slots=True)
class Found:
    """A recalled memory (without its vector) and how near it is (-1 to 1)."""

    row: MemoryRow
    score: float


class _Owner:
    """One owner's memories of one vector space and width, as a matrix (or lists)."""

    def __init__(self, width: int, numpy: bool) -> None:
        self.width = width  # bytes per vector
        self.numpy = numpy
        self.stamp = 0
        self.rows: list[MemoryRow] = []
        self.live: list[bool] = []
        self.at: dict[str, int] = {}
        self.vectors: list[tuple[float, ...]] = []
        self.matrix: Any = None  # numpy (capacity, dim), rows past len(self.rows) unused
        self.mask: Any = None  # numpy bool (capacity,): False for a forgotten row

    def load(self, rows: Sequence[MemoryRow], embedder: str) -> None:
        """The first rows of an empty owner, in one go (one matrix built at once)."""
        if not self.numpy or self.rows:
            for row in rows:
                self.apply(row, embedder)
            return
        import numpy as np

        kept = [r for r in rows if self._usable(r, embedder)]
        size = max(1024, len(kept) * 2)
        self.matrix = np.zeros((size, self.width // 4), dtype="<f4")
        self.mask = np.zeros(size, dtype=bool)
        if kept:
            flat = np.frombuffer(b"".join(r.vector for r in kept), dtype="<f4")
            self.matrix[: len(kept)] = flat.reshape(len(kept), self.width // 4)
            self.mask[: len(kept)] = True
        self.rows = [_bare(r) for r in kept]
        self.live = [True] * len(kept)
        self.at = {r.memory_id: i for i, r in enumerate(kept)}

    def size(self) -> int:
        """About how many bytes its vectors take."""
        return len(self.rows) * self.width

    def _usable(self, row: MemoryRow, embedder: str) -> bool:
        return not row.forgotten and row.embedder == embedder and len(row.vector) == self.width

    def apply(self, row: MemoryRow, embedder: str) -> None:
        usable = self._usable(row, embedder)
        i = self.at.get(row.memory_id)
        if i is None:
            if not usable:
                return
            i = self.at[row.memory_id] = len(self.rows)
            self.rows.append(row)
            self.live.append(True)
            self._grow(i + 1)
        self.rows[i], self.live[i] = _bare(row), usable
        if self.numpy:
            self.mask[i] = usable
            if usable:
                import numpy as np

                self.matrix[i] = np.frombuffer(row.vector, dtype="<f4")
        elif usable:
            self.vectors[i] = unpack(row.vector)

    def _grow(self, size: int) -> None:
        if not self.numpy:
            self.vectors.append(())
            return
        import numpy as np

        capacity = 0 if self.matrix is None else len(self.matrix)
        if size <= capacity:
            return
        bigger = max(1024, capacity * 2)
        matrix = np.zeros((bigger, self.width // 4), dtype="<f4")
        mask = np.zeros(bigger, dtype=bool)
        if self.matrix is not None:
            matrix[:capacity], mask[:capacity] = self.matrix, self.mask
        self.matrix, self.mask = matrix, mask

    def search(self, query: bytes, k: int) -> list[Found]:
        n = len(self.rows)
        if n == 0:
            return []
        if self.numpy:
            import numpy as np

            scores = self.matrix[:n] @ np.frombuffer(query, dtype="<f4")
            scores[~self.mask[:n]] = -np.inf
            top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
            return [Found(self.rows[i], float(scores[i])) for i in map(int, top) if self.live[i]]
        q = unpack(query)
        scored = (
            (sum(a * b for a, b in zip(v, q, strict=True)), i)
            for i, v in enumerate(self.vectors)
            if self.live[i]
        )
        return [Found(self.rows[i], s) for s, i in heapq.nlargest(k, scored)]


def _bare(row: MemoryRow) -> MemoryRow:
    """``row`` without its vector (the matrix holds it), made faster than replace()."""
    return MemoryRow(row.memory_id, row.tenant, row.owner, row.text, row.source, row.embedder,
                     b"", row.provenance, row.made_by, row.made_at, row.changed_at,
                     row.forgotten, row.changed, row.seal)  # fmt: skip


class ExactIndex:
    """Exact search over a store's memory rows, each owner's vectors kept current."""

    def __init__(self, rows: MemoryRows, most_bytes: int = MAX_CACHED_BYTES) -> None:
        self._rows = rows
        self._lock = threading.Lock()
        # least recently searched first: the first to go when the vectors kept pass
        # ``most_bytes`` (a worker runs many agents; each one's matrix is loaded again)
        self._owners: OrderedDict[tuple[str, str, str, int], _Owner] = OrderedDict()
        self._most = most_bytes

    def search(
        self, tenant: str, owners: Sequence[str], embedder: str, query: bytes, k: int
    ) -> list[Found]:
        """The ``k`` memories of ``owners`` (in ``tenant``) nearest ``query``, nearest
        first, among those made by ``embedder`` with the query's width."""
        if k <= 0:
            return []
        found: list[Found] = []
        for owner in owners:
            stamp = self._rows.memory_stamp(tenant, owner)
            key = (tenant, owner, embedder, len(query))
            with self._lock:  # one search or update of an owner's matrix at a time
                held = self._owners.get(key)
                if held is None or stamp < held.stamp:  # new, or the store was put back
                    held = self._owners[key] = _Owner(len(query), HAVE_NUMPY)
                self._owners.move_to_end(key)
                if held.stamp != stamp:
                    written = self._rows.memories_since(tenant, owner, held.stamp)
                    held.load(written, embedder)
                    held.stamp = max([held.stamp, *(r.changed for r in written)])
                found += held.search(query, k)
                self._evict()
        return sorted(found, key=lambda f: (-f.score, f.row.memory_id))[:k]

    def _evict(self) -> None:
        """Drop the least recently searched owners past the bound (never the last)."""
        total = sum(o.size() for o in self._owners.values())
        while total > self._most and len(self._owners) > 1:
            _, gone = self._owners.popitem(last=False)
            total -= gone.size()


_INDEXES: weakref.WeakKeyDictionary[MemoryRows, ExactIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def index_of(rows: MemoryRows) -> ExactIndex:
    """The one index of a store in this process (its matrices shared by its users)."""
    with _INDEXES_LOCK:
        found = _INDEXES.get(rows)
        if found is None:
            found = _INDEXES[rows] = ExactIndex(rows)
        return found
