"""Small statistics helpers (the standard library's, plus nearest-rank percentiles)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def median(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.median(data) if data else float("nan")


def pct(values: Iterable[float], p: float) -> float:
    """The ``p``-th percentile by nearest rank."""
    data = sorted(values)
    if not data:
        return float("nan")
    k = max(0, min(len(data) - 1, round(p / 100 * len(data)) - 1))
    return data[k]
