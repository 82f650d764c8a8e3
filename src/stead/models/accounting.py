"""What a model's answer cost and took, as the journal records it with the event."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TOKEN_DETAIL = ("input_tokens", "output_tokens", "cached_tokens")


def attempt_fields(attempts: Sequence[Any]) -> dict[str, Any]:
    """Each HTTP request a model made, as journaled (nothing for an offline model)."""
    if not attempts:
        return {}
    return {"attempts": [a if isinstance(a, Mapping) else a.to_json() for a in attempts]}


def usage_fields(totals: Mapping[str, float], usage: Mapping[str, float] | None) -> dict[str, Any]:
    """The decision's reported cost, with the agent's running ``totals`` (for budgets)."""
    if not usage:
        return {}
    tokens = float(usage.get("tokens", 0))
    spend = float(usage.get("spend", 0))
    detail = {k: float(usage[k]) for k in TOKEN_DETAIL if k in usage}
    return {
        "usage": {
            "tokens": tokens,
            "spend": spend,
            **detail,
            "total_tokens": totals.get("tokens", 0) + tokens,
            "total_spend": totals.get("spend", 0) + spend,
        }
    }
