"""What an agent may do now, and until when: the report ``stead scope`` prints and the
API answers, made from the agent's state alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..state import State
from .gate import ancestry_problem
from .grants import inactive_reason


def scope_report(
    state: State, policy_version: int, now: float, find: Callable[[str], State | None]
) -> dict[str, Any]:
    """The agent's autonomy, grants (each with why it is inactive, if it is: expired,
    revoked, or a delegation whose source is), approvals and proposals. ``find``
    looks up another agent's state (a delegating agent), None if there is none."""
    live = {
        gid: inactive_reason(g, now) or ancestry_problem(g, now, find) or ""
        for gid, g in state.grants.items()
    }
    return {
        "agent_id": state.agent_id,
        "autonomy": state.autonomy,
        "tool_autonomy": state.tool_autonomy,
        "policy_version": policy_version,
        "grants": [{**g, "inactive": live[gid] or None} for gid, g in sorted(state.grants.items())],
        "approvals": list(state.approvals.values()),
        "proposals": list(state.proposals.values()),
    }
