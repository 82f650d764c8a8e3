"""Ending an agent: a person cancels it, whatever it is doing.

A cancel is journaled like every person's act (``status_changed`` to
``cancelled``, with who and why), and ends the agent for good: no worker
runs it again, its waiting approvals leave the inbox and cannot be answered,
and nothing more is appended to it but what a person records.

An agent a worker is running is not waited for. The cancel takes its lease
(:meth:`Runtime.hold` with ``force``), which raises the lease's epoch: the
worker's next write is refused (``StaleEpoch``), so the step it is in ends
there with nothing more committed, and its next lease renewal is refused,
which kills its sandbox (:mod:`stead.runtime.heartbeat`). Calls it had begun
and not finished are named in the cancel's event.

Deleting an agent, and collecting what finished agents left, is
:mod:`stead.snapshots.retention`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from ..errors import LeaseHeld, UsageError
from ..journal import Kind, NewEvent
from ..state import State
from ..store.base import Store
from .activation import Activation

CANCELLED = "cancelled"


class EndingActions:
    """Cancel, mixed into :class:`~stead.runtime.runtime.Runtime`."""

    person: Callable[[], str]
    hold: Callable[..., AbstractContextManager[Activation]]

    def cancel(self, agent_id: str, reason: str) -> State:
        """End the agent for good, recording who did and ``reason``."""
        reason = reason.strip()
        if not reason:
            raise UsageError("say why the agent is cancelled (--reason TEXT); it is journaled")
        for attempt in range(3):
            try:
                return self._cancel(agent_id, reason)
            except LeaseHeld:  # another took the lease between our look and our take
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _cancel(self, agent_id: str, reason: str) -> State:
        with self.hold(agent_id, force=True) as act:
            state = act.state
            if state.is_final:
                raise UsageError(
                    f"agent {agent_id} is {state.status} already: it cannot be cancelled"
                )
            who = self.person()
            said = {"status": CANCELLED, "reason": f"cancelled by {who}: {reason}",
                    "by": who, "interrupted": sorted({*state.pending, *state.unknown})}  # fmt: skip
            act.emit_event(NewEvent(Kind.STATUS_CHANGED, said))
            act.flush()
            return act.state


def cancelled_state(store: Store, agent_id: str) -> State | None:
    """The agent's state if a person cancelled it (what a worker whose writes were
    refused reports), else None."""
    state = store.load_state(agent_id)
    return state if state.status == CANCELLED else None
