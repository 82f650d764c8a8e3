"""What a model's tokens cost, for the ``budget`` monitor and ``stead show``.

Prices are US dollars per million tokens: input, output, and cached input
(tokens read from the provider's prompt cache). The table holds a few common
models; any other model costs 0 unless the worker's ``STEAD_MODEL_PRICES``
names a JSON file of the same shape, which is read once and wins over the
table::

    {"openai:my-model": {"input": 0.5, "output": 1.5, "cached_input": 0.05}}

Prices change: the table is a default, not a promise.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

PER_MILLION: dict[str, dict[str, float]] = {
    "openai:gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25},
    "openai:gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached_input": 0.075},
    "openai:gpt-4.1": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
    "openai:gpt-4.1-mini": {"input": 0.4, "output": 1.6, "cached_input": 0.1},
    "anthropic:claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cached_input": 0.3},
    "anthropic:claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cached_input": 0.1},
    "anthropic:claude-opus-4-1": {"input": 15.0, "output": 75.0, "cached_input": 1.5},
}
PRICES_ENV = "STEAD_MODEL_PRICES"


@cache
def _overrides(path: str) -> dict[str, dict[str, float]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8")[:1_000_000])
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, dict[str, float]] = {}
    for model, price in data.items():
        if isinstance(price, dict):
            out[str(model)] = {
                k: float(v)
                for k, v in price.items()
                if k in ("input", "output", "cached_input") and isinstance(v, int | float)
            }
    return out


def price_of(provider: str, name: str) -> dict[str, float]:
    """Dollars per million tokens of ``provider:name`` (empty: not known, so free)."""
    ref = f"{provider}:{name}"
    named = os.environ.get(PRICES_ENV)
    if named and ref in _overrides(named):
        return _overrides(named)[ref]
    return PER_MILLION.get(ref, {})


def spend_of(provider: str, name: str, inp: int, out: int, cached: int) -> float:
    """What ``inp`` input tokens (``cached`` of them from the cache) and ``out`` cost."""
    price = price_of(provider, name)
    fresh = max(0, inp - cached)
    total = (
        fresh * price.get("input", 0.0)
        + cached * price.get("cached_input", price.get("input", 0.0))
        + out * price.get("output", 0.0)
    )
    return round(total / 1e6, 8)
