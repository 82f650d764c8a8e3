"""Auditing one agent: its journal, and its stored state against its journal.

Three things must hold, and :func:`audit` reports the first that does not:

1. the hash chain verifies from the first event to the last;
2. the chain ends where the stored state says the agent is (same version, same
   head hash), so deleting the newest events cannot go unnoticed;
3. folding the journal gives exactly the stored state, so an edit to the state
   row (memory, the list of calls awaiting a person…) cannot go unnoticed either.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import IntegrityError
from ..journal import verify_chain
from ..state import fold
from ..store.base import Store


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The verdict on one agent's stored history."""

    agent_id: str
    ok: bool
    events: int
    head_hash: str | None
    bad_event: int | None = None
    reason: str = ""


def audit(store: Store, agent_id: str) -> AuditReport:
    """Check the agent's journal and stored state; never raises for bad data."""
    state = store.load_state(agent_id)
    try:
        chain = verify_chain(store.read_events(agent_id))
    except IntegrityError as exc:
        return AuditReport(agent_id, False, 0, None, exc.seq, str(exc))
    if not chain.ok:
        return AuditReport(agent_id, False, chain.events, None, chain.bad_seq, chain.reason)
    if chain.events != state.version or chain.head_hash != state.head_hash:
        return AuditReport(
            agent_id,
            False,
            chain.events,
            None,
            chain.events + 1,
            f"the journal ends at event {chain.events} but the agent's stored state is at "
            f"version {state.version}: events from {chain.events + 1} on are missing",
        )
    folded = fold(store.read_events(agent_id)).to_json()
    stored = state.to_json()
    if folded != stored:
        fields = sorted(k for k in stored if folded.get(k) != stored.get(k))
        return AuditReport(
            agent_id,
            False,
            chain.events,
            None,
            None,
            f"the stored state differs from the journal in {', '.join(fields)}: it was "
            "changed outside stead",
        )
    return AuditReport(agent_id, True, chain.events, chain.head_hash)
