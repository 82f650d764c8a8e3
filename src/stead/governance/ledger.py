"""The scope ledger's integrity check, made before an agent resumes.

The grants and autonomy levels an agent runs under are folded into its state
row, but the journal is what they come from. Before an activation acts, the
runtime reads the agent's ledger events (creation, grants, revocations,
autonomy changes: a handful, read through an index) and checks that each one
still matches its hash and that folding them gives exactly the grants and
levels in the state. A deleted, edited or added grant on either side makes the
agent refuse to run, with an error naming what differs, instead of running
with none, with defaults, or with more than it was given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..canonical import dumps
from ..errors import IntegrityError
from ..journal import Event, Kind, event_hash
from ..state import State, apply_in_place

LEDGER_KINDS = (
    Kind.AGENT_CREATED,
    Kind.AGENT_FORKED,
    Kind.AGENT_IMPORTED,
    Kind.AUTONOMY_CHANGED,
    Kind.GRANT_ADDED,
    Kind.GRANT_REVOKED,
)


def _definition(grants: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    # uses are counted from call events, not ledger events; compared elsewhere
    return {gid: {k: v for k, v in g.items() if k != "uses"} for gid, g in grants.items()}


def verify_ledger(state: State, events: Iterable[Event]) -> None:
    """Raise :class:`~stead.errors.IntegrityError` unless ``events`` give ``state``'s scope."""
    agent = state.agent_id
    folded = State()
    seen = 0
    for ev in events:
        data_json = ev.data_json if ev.data_json is not None else dumps(dict(ev.data))
        if event_hash(ev.agent_id, ev.seq, ev.kind, ev.at, data_json, ev.prev_hash) != ev.hash:
            raise IntegrityError(
                f"agent {agent}: ledger event {ev.seq} ({ev.kind}) does not match its hash; "
                f"its grants cannot be trusted, so it will not run. Run `stead audit verify "
                f"{agent}` and restore the store from a backup",
                seq=ev.seq,
            )
        apply_in_place(folded, ev)
        seen += 1
    if seen == 0:
        raise IntegrityError(
            f"agent {agent}: its journal has no creation event, so its scope is unknown; "
            "it will not run. Restore the store from a backup"
        )
    problems = []
    if (folded.autonomy, folded.tool_autonomy) != (state.autonomy, state.tool_autonomy):
        problems.append(
            f"autonomy in the state is {state.autonomy} {state.tool_autonomy or ''}, the "
            f"journal says {folded.autonomy} {folded.tool_autonomy or ''}"
        )
    stored, journaled = _definition(state.grants), _definition(folded.grants)
    for gid in sorted(set(stored) | set(journaled)):
        if gid not in stored:
            problems.append(f"grant {gid} is in the journal but missing from the state")
        elif gid not in journaled:
            problems.append(f"grant {gid} is in the state but not in the journal")
        elif stored[gid] != journaled[gid]:
            problems.append(f"grant {gid} differs between the state and the journal")
    if problems:
        raise IntegrityError(
            f"agent {agent}: its scope ledger does not match its journal ("
            + "; ".join(problems)
            + f"); it will not run with a scope it cannot trust. Run `stead audit verify "
            f"{agent}` and restore the store from a backup"
        )
