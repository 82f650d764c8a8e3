"""The journal: typed, hash-chained events, one sequence per agent.

An event's ``seq`` is the agent's version after the event. Its ``hash`` covers
the agent id, the sequence number, the kind, the timestamp, the data and the
previous event's hash, so changing any stored byte of any event breaks the chain
from that event on, and :func:`verify_chain` names the first event that no longer
matches.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .canonical import dumps, loads, sha256_hex

GENESIS_HASH = "0" * 64


class Kind(enum.StrEnum):
    """Every kind of event an agent's journal can hold."""

    AGENT_CREATED = "agent_created"
    ACTIVATION_STARTED = "activation_started"
    WORKSPACE_RESTORED = "workspace_restored"
    DECISION = "decision"
    ANSWER_REFUSED = "answer_refused"
    CONTEXT_COMPACTED = "context_compacted"
    RESULT_READ = "result_read"
    QUERY_ANSWERED = "query_answered"
    FLOW_ALLOWED = "flow_allowed"
    MODEL_CHANGED = "model_changed"
    TOOL_INTENT = "tool_intent"
    TOOL_RESULT = "tool_result"
    RECONCILED = "reconciled"
    OUTCOME_UNKNOWN = "outcome_unknown"
    CALL_RESOLVED = "call_resolved"
    MEMORY_WRITTEN = "memory_written"
    GOAL_PUSHED = "goal_pushed"
    GOAL_COMPLETED = "goal_completed"
    INPUT_REQUESTED = "input_requested"
    INPUT_RECEIVED = "input_received"
    FINISH_CLAIMED = "finish_claimed"
    STEP_COMPLETED = "step_completed"
    STATUS_CHANGED = "status_changed"
    # governance: who may do what, decided by whom (see stead.governance)
    AUTONOMY_CHANGED = "autonomy_changed"
    GRANT_ADDED = "grant_added"
    GRANT_REVOKED = "grant_revoked"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_GRANTED = "approval_granted"
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_LAPSED = "approval_lapsed"
    PROPOSAL_RECORDED = "proposal_recorded"
    PROPOSAL_ACCEPTED = "proposal_accepted"
    GOVERNANCE_REFUSED = "governance_refused"
    IDENTITY_CREATED = "identity_created"
    MESSAGE_RECEIVED = "message_received"
    MESSAGE_REFUSED = "message_refused"
    DELEGATED = "delegated"
    MESSAGE_SENT = "message_sent"
    # integrity: claims are checked, not believed (see stead.integrity.completion)
    GOAL_REJECTED = "goal_rejected"
    GOAL_SIGNED_OFF = "goal_signed_off"
    FINISH_REJECTED = "finish_rejected"
    COMPLETION_CERTIFIED = "completion_certified"
    COMPENSATED = "compensated"
    COMPENSATION_NEEDED = "compensation_needed"
    ROLLED_BACK = "rolled_back"
    SESSION_PROFILED = "session_profiled"
    VIOLATION = "violation"
    VIOLATION_CLEARED = "violation_cleared"
    # hibernation: idle agents cost only storage (see stead.snapshots.hibernation)
    TIMER_SET = "timer_set"
    TIMER_FIRED = "timer_fired"
    HIBERNATED = "hibernated"
    RESTORED = "restored"
    AGENT_FORKED = "agent_forked"
    AGENT_IMPORTED = "agent_imported"
    AGENT_MOVED = "agent_moved"
    # tools from MCP servers: the list the agent is shown (see stead.tools.mcp)
    MCP_TOOLS_LISTED = "mcp_tools_listed"
    # schedules: who asked for the agent to be woken when, and each time it was
    # (see stead.schedules)
    SCHEDULE_SET = "schedule_set"
    SCHEDULE_CHANGED = "schedule_changed"
    SCHEDULE_FIRED = "schedule_fired"
    # a new version of the agent's spec, applied by a person (see stead.upgrades)
    SPEC_UPGRADED = "spec_upgraded"
    # long-term memories a person saved, corrected or forgot (see stead.memories;
    # an agent's own saves and recalls are its tool calls); records only: no fold
    MEMORY_SAVED = "memory_saved"
    MEMORY_CORRECTED = "memory_corrected"
    MEMORY_FORGOTTEN = "memory_forgotten"


@dataclass(frozen=True, slots=True)
class Event:
    """One committed fact about an agent.

    ``epoch`` is the lease epoch the event was written under; it is operational
    metadata for fencing and is not part of the hash.
    """

    agent_id: str
    seq: int
    kind: str
    at: float
    data: Mapping[str, Any]
    prev_hash: str
    hash: str
    epoch: int = 0
    # The exact stored text of ``data``, when read from a store; verification
    # hashes these bytes so that even an edit that parses to the same value shows.
    data_json: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "seq": self.seq,
            "kind": self.kind,
            "at": self.at,
            "data": dict(self.data),
            "prev_hash": self.prev_hash,
            "hash": self.hash,
            "epoch": self.epoch,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Event:
        return cls(
            agent_id=str(obj["agent_id"]),
            seq=int(obj["seq"]),
            kind=str(obj["kind"]),
            at=float(obj["at"]),
            data=dict(obj["data"]),
            prev_hash=str(obj["prev_hash"]),
            hash=str(obj["hash"]),
            epoch=int(obj.get("epoch", 0)),
        )


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event the runtime wants to append; the journal assigns seq and hashes."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)


_json_str = json.JSONEncoder(ensure_ascii=False).encode


def event_hash(
    agent_id: str, seq: int, kind: str, at: float, data_json: str, prev_hash: str
) -> str:
    """The chain hash of one event, from the canonical JSON of its data.

    ``at`` is hashed as a float, so a whole-number timestamp hashes the same
    whether it was stored as ``1767225600`` or ``1767225600.0``.
    """
    # canonical JSON of {"agent_id", "at", "kind", "seq"}, written out directly
    # because it is made for every event (tests pin it to dumps() of the dict)
    header = (
        f'{{"agent_id":{_json_str(agent_id)},"at":{float(at)!r},'
        f'"kind":{_json_str(kind)},"seq":{int(seq)}}}'
    )
    return sha256_hex(f"{prev_hash}\n{header}\n{data_json}")


def seal(
    agent_id: str,
    start_seq: int,
    prev_hash: str,
    at: float,
    epoch: int,
    new_events: Iterable[NewEvent],
) -> list[Event]:
    """Turn new events into chained events numbered from ``start_seq``."""
    sealed: list[Event] = []
    at = float(at)
    for offset, ev in enumerate(new_events):
        seq = start_seq + offset
        data_json = dumps(dict(ev.data))
        h = event_hash(agent_id, seq, ev.kind, at, data_json, prev_hash)
        # the data as a reader will see it: parsed back from its canonical JSON,
        # so the state folded here equals the state folded from the store
        data = loads(data_json)
        sealed.append(Event(agent_id, seq, ev.kind, at, data, prev_hash, h, epoch, data_json))
        prev_hash = h
    return sealed


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The outcome of walking a hash chain."""

    ok: bool
    events: int
    head_hash: str
    bad_seq: int | None = None
    reason: str = ""


def verify_chain(
    events: Iterable[Event], first_seq: int = 1, prev_hash: str = GENESIS_HASH
) -> ChainReport:
    """Walk events in order and report the first one that does not verify.

    ``first_seq`` and ``prev_hash`` start the walk part-way, at an event already
    trusted to follow ``prev_hash`` (an incremental check from a checkpoint).
    """
    prev = prev_hash
    count = 0
    expected_seq = first_seq
    for ev in events:
        if ev.seq != expected_seq:
            return ChainReport(
                False,
                count,
                prev,
                ev.seq,
                f"expected event {expected_seq} but found {ev.seq}: "
                "an event is missing or out of order",
            )
        if ev.prev_hash != prev:
            return ChainReport(
                False, count, prev, ev.seq, "its prev_hash does not match the previous event's hash"
            )
        data_json = ev.data_json if ev.data_json is not None else dumps(dict(ev.data))
        recomputed = event_hash(ev.agent_id, ev.seq, ev.kind, ev.at, data_json, ev.prev_hash)
        if recomputed != ev.hash:
            return ChainReport(
                False,
                count,
                prev,
                ev.seq,
                "its content does not match its hash (it was changed after it was written)",
            )
        prev = ev.hash
        count += 1
        expected_seq += 1
    return ChainReport(True, count, prev)
