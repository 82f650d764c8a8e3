"""Vectors as recall keeps them: checked, normalised, packed as float32 bytes.

What an embedder answers comes from outside (a server of the operator's or a
third party's) and is hostile until checked: the count must match the texts
sent, every vector must have the one dimension, every number must be finite and
not absurd, and a vector of zeros (nothing to compare by) is refused.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

from ..errors import ModelError

MAX_DIMENSION = 8192
"""The widest vector accepted (the largest common models give 3,072)."""
MAX_COMPONENT = 1e6
"""No component of an embedding is near this; one that is says the answer is wrong."""


def checked(answer: Any, count: int, dimension: int | None, where: str) -> list[bytes]:
    """The ``count`` vectors of an embedder's answer, each normalised and packed;
    a :class:`~stead.errors.ModelError` saying what is wrong otherwise."""
    if not isinstance(answer, list) or len(answer) != count:
        got = len(answer) if isinstance(answer, list) else type(answer).__name__
        raise ModelError(f"{where} answered {got} vectors for {count} texts; check the server")
    packed: list[bytes] = []
    for i, vector in enumerate(answer):
        if not isinstance(vector, list) or not 0 < len(vector) <= MAX_DIMENSION:
            raise ModelError(f"{where}: vector {i} is not a list of 1 to {MAX_DIMENSION} numbers")
        if dimension is not None and len(vector) != dimension:
            raise ModelError(
                f"{where}: vector {i} has {len(vector)} dimensions, not {dimension}; "
                "memories saved with one embedding model cannot be searched with another"
            )
        dimension = len(vector)
        packed.append(pack(vector, f"{where}: vector {i}"))
    return packed


def pack(vector: Sequence[Any], where: str = "vector") -> bytes:
    """``vector`` normalised to length 1, as float32 bytes (little-endian)."""
    values: list[float] = []
    for x in vector:
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise ModelError(f"{where} holds {type(x).__name__}, not a number")
        f = float(x)
        if not math.isfinite(f) or abs(f) > MAX_COMPONENT:
            raise ModelError(f"{where} holds {f!r}: not a finite embedding component")
        values.append(f)
    norm = math.sqrt(math.fsum(v * v for v in values))
    if norm == 0.0:
        raise ModelError(f"{where} is all zeros: nothing to compare by")
    return struct.pack(f"<{len(values)}f", *(v / norm for v in values))


def unpack(data: bytes) -> tuple[float, ...]:
    """The numbers of packed float32 bytes."""
    return struct.unpack(f"<{len(data) // 4}f", data)
