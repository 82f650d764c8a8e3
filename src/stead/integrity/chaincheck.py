"""The journal half of an audit: the chain verifies, ends at the state, folds to it.

:func:`audit_journal` checks points 1 to 3 of :mod:`stead.integrity.audit`; it
is also the full check :mod:`stead.integrity.anchoring` makes before running an
agent whose anchor cannot vouch for its journal. Both import it from here.
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
    anchored: bool = False
    anchor: str = ""
    """What the anchor check found: anchored by which key, or why not."""
    drift: tuple[str, ...] = ()
    """Workspace paths that differ from the last committed manifest."""
    spec: str = ""
    """What the check of its spec and row found: where the spec is sealed, or why not."""


def audit_journal(store: Store, agent_id: str) -> AuditReport:
    """Check the agent's journal and stored state (1 to 3 above); never raises for bad data."""
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
