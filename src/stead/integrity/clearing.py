"""A person clearing a violation that suspended an agent: ``stead clear`` and the API."""

from __future__ import annotations

from ..errors import UsageError
from ..journal import Kind, NewEvent
from ..state import State


def cleared(state: State, violation_id: str, by: str, reason: str) -> list[NewEvent]:
    """The event that clears ``violation_id``; refused if it is not open."""
    if violation_id not in state.violations:
        open_ = ", ".join(sorted(state.violations)) or "none"
        raise UsageError(
            f"agent {state.agent_id} has no open violation {violation_id}; open: {open_}"
        )
    return [NewEvent(Kind.VIOLATION_CLEARED,
                     {"violation_id": violation_id, "by": by, "reason": reason})]  # fmt: skip
