"""Exact top-k search over an owner's memories: every vector compared, none missed.

Vectors are normalised (:mod:`.vectors`), so the score is a dot product. With
numpy (the ``memory`` extra) an owner's vectors are one float32 matrix and a
search is one matrix-vector product and a partial sort; without it, plain
Python compares them one by one (correct, and slow past a few thousand).

A process keeps each owner's matrix while the store says it is current: the
store's ``changed`` count for the owner (:meth:`MemoryRows.memory_stamp`, one
indexed read) is the same as when it was loaded. Any write, from this process
or another, raises the count, and the next search loads the rows again.
"""

from __future__ import annotations

import heapq
import importlib.util
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..store.memory_rows import MemoryRow, MemoryRows
from .vectors import unpack

HAVE_NUMPY = importlib.util.find_spec("numpy") is not None


@dataclass(frozen=True, slots=True)
class Found:
    """A recalled memory (without its vector) and how near it is (-1 to 1)."""

    row: MemoryRow
    score: float


@dataclass(frozen=True, slots=True)
class _Loaded:
    stamp: int
    rows: tuple[MemoryRow, ...]
    matrix: Any  # numpy float32 (n, d), or the vectors as tuples


class ExactIndex:
    """Exact search over a store's memory rows, with each owner's vectors cached."""

    def __init__(self, rows: MemoryRows) -> None:
        self._rows = rows
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], _Loaded] = {}

    def search(
        self, tenant: str, owners: Sequence[str], embedder: str, query: bytes, k: int
    ) -> list[Found]:
        """The ``k`` memories of ``owners`` (in ``tenant``) nearest ``query``, nearest
        first, among those made by ``embedder`` with its dimension."""
        found: list[Found] = []
        for owner in owners:
            found += self._one(self._loaded(tenant, owner, embedder, len(query)), query, k)
        return sorted(found, key=lambda f: (-f.score, f.row.memory_id))[:k]

    def _loaded(self, tenant: str, owner: str, embedder: str, size: int) -> _Loaded:
        key = (tenant, owner, embedder)
        stamp = self._rows.memory_stamp(tenant, owner)
        with self._lock:
            held = self._cache.get(key)
        if held is not None and held.stamp == stamp and _width(held) in (0, size):
            return held
        rows = [
            r
            for r in self._rows.list_memories(tenant, [owner], vectors=True)
            if r.embedder == embedder and len(r.vector) == size
        ]
        loaded = _Loaded(stamp, tuple(replace(r, vector=b"") for r in rows), _matrix(rows))
        with self._lock:
            self._cache[key] = loaded
        return loaded

    def _one(self, loaded: _Loaded, query: bytes, k: int) -> list[Found]:
        if not loaded.rows or k <= 0:
            return []
        if HAVE_NUMPY:
            import numpy as np

            scores = loaded.matrix @ np.frombuffer(query, dtype="<f4")
            if k < len(scores):
                top = np.argpartition(-scores, k - 1)[:k]
            else:
                top = np.arange(len(scores))
            return [Found(loaded.rows[int(i)], float(scores[int(i)])) for i in top]
        q = unpack(query)
        scored = (
            (sum(a * b for a, b in zip(v, q, strict=True)), i) for i, v in enumerate(loaded.matrix)
        )
        return [Found(loaded.rows[i], s) for s, i in heapq.nlargest(k, scored)]


def _width(loaded: _Loaded) -> int:
    if not loaded.rows:
        return 0
    return int(loaded.matrix.shape[1]) * 4 if HAVE_NUMPY else len(loaded.matrix[0]) * 4


def _matrix(rows: Sequence[MemoryRow]) -> Any:
    if HAVE_NUMPY:
        import numpy as np

        if not rows:
            return np.zeros((0, 0), dtype="<f4")
        flat = np.frombuffer(b"".join(r.vector for r in rows), dtype="<f4")
        return flat.reshape(len(rows), len(rows[0].vector) // 4)
    return [unpack(r.vector) for r in rows]


_INDEXES: weakref.WeakKeyDictionary[MemoryRows, ExactIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def index_of(rows: MemoryRows) -> ExactIndex:
    """The one index of a store in this process (its cache shared by its users)."""
    with _INDEXES_LOCK:
        found = _INDEXES.get(rows)
        if found is None:
            found = _INDEXES[rows] = ExactIndex(rows)
        return found
