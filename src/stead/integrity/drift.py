"""Drift: how one session's behaviour compares with the agent's baseline.

A session is one activation. When it ends, its profile (how many steps, which
tools how often, how many calls failed or were refused, tokens) is journaled
as ``session_profiled`` together with the baseline it is compared with: the
first ``baseline_sessions`` sessions' profiles added up. Everything needed to
judge drift is in that event, so the rule (:class:`stead.integrity.monitors.Drift`)
reaches the same answer live and in ``stead check``.

The comparison, each against its threshold:

* tool mix: the total variation distance between the two distributions of
  tool calls (0: the same mix, 1: no tool in common);
* error rate and refusal rate (per call): the absolute difference;
* tokens per step: the relative change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Profile = dict[str, Any]


def empty() -> Profile:
    return {"sessions": 0, "steps": 0, "calls": {}, "errors": 0, "refusals": 0, "tokens": 0.0}


def merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> Profile:
    calls = dict(a["calls"])
    for tool, n in b["calls"].items():
        calls[tool] = calls.get(tool, 0) + n
    return {
        "sessions": a["sessions"] + b["sessions"],
        "steps": a["steps"] + b["steps"],
        "calls": calls,
        "errors": a["errors"] + b["errors"],
        "refusals": a["refusals"] + b["refusals"],
        "tokens": a["tokens"] + b["tokens"],
    }


def _rate(n: float, d: float) -> float:
    return n / d if d else 0.0


def shifts(profile: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[str, float]:
    """How far the profile is from the baseline, by measure."""
    p_total = sum(profile["calls"].values())
    b_total = sum(baseline["calls"].values())
    tools = set(profile["calls"]) | set(baseline["calls"])
    mix = 0.5 * sum(
        abs(
            _rate(profile["calls"].get(t, 0), p_total) - _rate(baseline["calls"].get(t, 0), b_total)
        )
        for t in tools
    )
    b_tokens = _rate(baseline["tokens"], baseline["steps"])
    p_tokens = _rate(profile["tokens"], profile["steps"])
    return {
        "tool_mix": round(mix, 6),
        "error_rate": round(
            abs(_rate(profile["errors"], p_total) - _rate(baseline["errors"], b_total)), 6
        ),
        "refusal_rate": round(
            abs(_rate(profile["refusals"], p_total) - _rate(baseline["refusals"], b_total)), 6
        ),
        "tokens_per_step": round(abs(p_tokens - b_tokens) / b_tokens, 6) if b_tokens else 0.0,
    }


DEFAULT_THRESHOLDS = {
    "tool_mix": 0.4,
    "error_rate": 0.3,
    "refusal_rate": 0.3,
    "tokens_per_step": 1.0,
}


def drifted(
    profile: Mapping[str, Any], baseline: Mapping[str, Any], thresholds: Mapping[str, float]
) -> dict[str, float]:
    """The measures beyond their thresholds (empty: no drift)."""
    return {k: v for k, v in shifts(profile, baseline).items() if v > thresholds.get(k, 1e9)}
