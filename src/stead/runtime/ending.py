"""Ending an agent: a person cancels it, whatever it is doing, or deletes it.

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

A delete removes the agent's rows (:mod:`stead.store.deletion`) and its
workspace folder, after an export if asked; refused while anyone holds it.
Its content in the blob store goes at the next collection (``stead gc``).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..errors import LeaseHeld, UsageError
from ..integrity.workhead import record_path
from ..journal import Kind, NewEvent
from ..sandbox.workspace import Workspace
from ..state import FINAL_STATUSES, State
from ..store.base import Store
from .activation import Activation

CANCELLED = "cancelled"


class EndingActions:
    """Cancel and delete, mixed into :class:`~stead.runtime.runtime.Runtime`."""

    person: Callable[[], str]
    hold: Callable[..., AbstractContextManager[Activation]]
    store: Store
    clock: Clock
    workspace: Callable[[str, str], Workspace]
    export: Callable[..., dict[str, Any]]

    def retire_finished(self, older_than: float, tenant: str | None = None) -> list[str]:
        """Delete every finished agent (completed, failed, cancelled, moved) whose last
        change is more than ``older_than`` seconds ago; the ids deleted. One held
        at the moment is left for the next time."""
        cutoff = self.clock.now() - older_than
        gone = []
        for summary in self.store.list_agents(tenant):
            if summary.status in FINAL_STATUSES and summary.updated_at < cutoff:
                with contextlib.suppress(LeaseHeld):
                    self.delete(summary.agent_id)
                    gone.append(summary.agent_id)
        return gone

    def delete(self, agent_id: str, export_to: Path | None = None) -> dict[str, Any]:
        """Delete the agent: its rows, then its workspace; with ``export_to``, its
        archive is written there first (and nothing is deleted if that fails)."""
        record = self.store.get_record(agent_id)
        exported = self.export(agent_id, export_to) if export_to is not None else None
        self.store.delete_agent(agent_id, self.clock.now())
        root = self.workspace(agent_id, record.tenant).root
        # the rows are gone first: a workspace without them is litter, never an agent
        shutil.rmtree(root, ignore_errors=True)
        record_path(root).unlink(missing_ok=True)
        return {"agent_id": agent_id, "tenant": record.tenant, "name": record.name,
                "exported": exported["path"] if exported else None}  # fmt: skip

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
