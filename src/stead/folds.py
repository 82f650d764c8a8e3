"""The folds of the later event kinds: governance, integrity, hibernation, lineage.

:func:`stead.state.apply_in_place` folds the core kinds itself (creation,
decisions, tool calls, memory, goals, steps) and hands every other kind to its
function in :data:`KIND_FOLDS`, one small function each. They follow the same
rule as the core fold: only top-level fields of the state are assigned, and
every container is replaced, never mutated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .journal import Event, Kind
from .values import values

if TYPE_CHECKING:
    from .state import State

NOTICES = 10
"""How many governance notices (refusals the model should know of) the state keeps."""
MESSAGE_MEMORY_SECONDS = 660.0
"""How long a received message id is remembered to refuse replays (its max age + skew)."""


def advance(inflight: dict[str, Any] | None, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """Mark the in-flight decision's action ``data['action']`` as done."""
    if inflight is None or data.get("action") is None:
        return inflight
    return {**inflight, "next": max(inflight["next"], int(data["action"]) + 1)}


TRUSTED_KEPT = 1000
"""How many values a person gave the state remembers as trusted."""


def trust(s: State, given: Iterable[str]) -> None:
    """Remember values a person gave, the latest :data:`TRUSTED_KEPT` of them."""
    new = [v for v in sorted(given) if v not in s.trusted_values]
    if new:
        s.trusted_values = [*s.trusted_values, *new][-TRUSTED_KEPT:]


def _notice(s: State, text: str) -> None:
    s.notices = [*s.notices, text][-NOTICES:]


def _wake_if_no_approval_pending(s: State) -> None:
    waiting = s.status == "waiting" and s.waiting_for == "approval"
    if waiting and not any(a["status"] == "requested" for a in s.approvals.values()):
        s.status, s.waiting_for, s.status_reason = "running", None, ""


def _autonomy_changed(s: State, d: Mapping[str, Any], ev: Event) -> None:
    if d.get("tool"):
        s.tool_autonomy = {**s.tool_autonomy, d["tool"]: d["level"]}
    else:
        s.autonomy = d["level"]


def _grant_added(s: State, d: Mapping[str, Any], ev: Event) -> None:
    grant = {**d["grant"], "uses": 0, "seq": ev.seq}
    s.grants = {**s.grants, grant["id"]: grant}
    if d.get("message"):
        _remember_message(s, d["message"], ev.at)


def _grant_revoked(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.grants = {g: v for g, v in s.grants.items() if g != d["grant"]}


def _approval_requested(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.approvals = {
        **s.approvals,
        d["approval_id"]: {
            key: d.get(key)
            for key in ("approval_id", "call_id", "tool", "args_hash", "policy_version", "reason")
        }
        | {
            "status": "requested",
            "requested_at": ev.at,
            "seq": ev.seq,
            "values": sorted(values(d.get("args"), s.provenance)),
        },
    }
    s.status, s.waiting_for = "waiting", "approval"
    s.status_reason = f"approval {d['approval_id']} for {d['tool']}: {d.get('reason', '')}"


def _approval_granted(s: State, d: Mapping[str, Any], ev: Event) -> None:
    a = s.approvals.get(d["approval_id"])
    if a is not None:
        granted = {
            "status": "granted",
            "by": d["by"],
            "valid_from": d["valid_from"],
            "valid_until": d["valid_until"],
        }
        s.approvals = {**s.approvals, d["approval_id"]: {**a, **granted}}
        if s.provenance < 2:
            # version 1: what a person approved became theirs, for every later call
            # too; since version 2 an approval authorises that call alone
            trust(s, a.get("values") or [])
    _wake_if_no_approval_pending(s)


def _approval_closed(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.approvals = {a: v for a, v in s.approvals.items() if a != d["approval_id"]}
    _wake_if_no_approval_pending(s)


def _proposal_recorded(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.proposals = {
        **s.proposals,
        d["proposal_id"]: {k: d[k] for k in ("proposal_id", "call_id", "tool", "args")},
    }


def _proposal_accepted(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.proposals = {p: v for p, v in s.proposals.items() if p != d["proposal_id"]}


def _governance_refused(s: State, d: Mapping[str, Any], ev: Event) -> None:
    _notice(s, f"refused: {d['reason']}")
    s.inflight = advance(s.inflight, d)


def _identity_created(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.public_key = d["public_key"]


def _remember_message(s: State, message_id: str, at: float) -> None:
    keep = {m: t for m, t in s.seen_messages.items() if at - t < MESSAGE_MEMORY_SECONDS}
    s.seen_messages = {**keep, message_id: at}


def _message_received(s: State, d: Mapping[str, Any], ev: Event) -> None:
    _remember_message(s, d["message"], ev.at)
    if d.get("text") is not None:
        s.inbox = [*s.inbox, f"[from agent {d['from']}, signature verified] {d['text']}"]
        if s.status == "waiting" and s.waiting_for == "input":
            s.status, s.waiting_for, s.status_reason = "running", None, ""


def _message_refused(s: State, d: Mapping[str, Any], ev: Event) -> None:
    _notice(s, f"a message claiming to be from {d.get('claimed_from')} was refused: {d['reason']}")


def _delegated(s: State, d: Mapping[str, Any], ev: Event) -> None:
    # the sender's record of a delegation or message it sent (or failed to); a
    # delivered delegation of counted uses takes them from the parent grant, so
    # a grant never allows more uses in all than it was given
    s.inflight = advance(s.inflight, d)
    parent = s.grants.get(d.get("parent", ""))
    if d.get("ok") and d.get("reserved") and parent is not None:
        s.grants = {
            **s.grants,
            parent["id"]: {**parent, "uses": parent.get("uses", 0) + int(d["reserved"])},
        }


def _goal_rejected(s: State, d: Mapping[str, Any], ev: Event) -> None:
    _notice(s, f"goal {d['id']} is not complete: " + "; ".join(d["reasons"]))
    s.inflight = advance(s.inflight, d)


def _goal_signed_off(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.goals = [{**g, "signed_off_by": d["by"]} if g["id"] == d["id"] else g for g in s.goals]


def use_answer_approval(s: State, d: Mapping[str, Any]) -> None:
    """Consume the approval under which a person saw a finish summary first (if any)."""
    aid = (d.get("provenance") or {}).get("approval")
    if aid:
        s.approvals = {a: v for a, v in s.approvals.items() if a != aid}


def _finish_rejected(s: State, d: Mapping[str, Any], ev: Event) -> None:
    use_answer_approval(s, d)
    _notice(s, "finish was not accepted: " + "; ".join(d["reasons"]))
    s.inflight = advance(s.inflight, d)


def _compensated(s: State, d: Mapping[str, Any], ev: Event) -> None:
    what = "undone" if d["ok"] else f"could not be undone ({d.get('error')})"
    _notice(s, f"call {d['call_id']} ({d['tool']}) was {what} by a rollback")


def _compensation_needed(s: State, d: Mapping[str, Any], ev: Event) -> None:
    _notice(s, f"call {d['call_id']} ({d['tool']}) must be undone by a person: {d['reason']}")


def _rolled_back(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.manifest = dict(d["manifest"])
    if "to_version" in d:
        # the agent's work goes back to the version; its authority stays as it is now
        for name, value in d["restored"].items():
            setattr(s, name, value)
        s.inflight, s.pending, s.unknown = None, {}, {}
        s.status, s.waiting_for, s.suspended_wait = "running", None, None
        s.status_reason = f"rolled back to version {d['to_version']}"
        _notice(s, f"rolled back to version {d['to_version']}")
    else:
        _notice(s, f"what depended on event {d['downstream_of']} was rolled back")


def _session_profiled(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.baseline = d["baseline_after"]


def _violation(s: State, d: Mapping[str, Any], ev: Event) -> None:
    _notice(s, f"monitor {d['rule']} ({d['verdict']}): {d['message']}")
    if d["verdict"] == "suspend":
        s.violations = {**s.violations, d["violation_id"]: dict(d)}
        if s.status == "waiting":
            # suspended while it waited: once cleared it waits again, for the same thing
            s.suspended_wait = {"waiting_for": s.waiting_for, "status_reason": s.status_reason}
        if not s.is_final:  # a finished agent keeps its status; the flag stays open
            s.status, s.status_reason = "needs_attention", f"{d['rule']}: {d['message']}"


def _violation_cleared(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.violations = {v: x for v, x in s.violations.items() if v != d["violation_id"]}
    if not s.violations and not s.unknown and s.status == "needs_attention":
        back_to_wait(s)


def back_to_wait(s: State) -> None:
    """Leave ``needs_attention``: wait again for what it waited for, unless that came."""
    w, s.suspended_wait = s.suspended_wait, None
    what = (w or {}).get("waiting_for")
    still = (
        (what == "input" and not s.inbox)
        or (what == "approval" and any(a["status"] == "requested" for a in s.approvals.values()))
        or (what == "timer" and s.timer is not None)
    )
    if w is not None and still:
        s.status, s.waiting_for, s.status_reason = "waiting", what, w["status_reason"]
    else:
        s.status, s.waiting_for, s.status_reason = "running", None, ""


CARRIED = (
    "memory",
    "goals",
    "inbox",
    "recent_calls",
    "calls_total",
    "manifest",
    "decisions",
    "steps_completed",
    "status",
    "status_reason",
    "waiting_for",
    "finish",
    "autonomy",
    "tool_autonomy",
    "violations",
    "suspended_wait",
    "usage",
    "baseline",
    "timer",
)
"""What a fork or an imported agent takes over from its origin's state. Never its
identity, grants (unless delegated anew), approvals, proposals or seen messages."""


def _timer_set(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.timer = {"timer_id": d["timer_id"], "due_at": d["due_at"], "reason": d.get("reason", "")}
    s.status, s.waiting_for = "waiting", "timer"
    s.status_reason = d.get("reason", "") or f"waiting until {d['due_at']}"
    s.inflight = advance(s.inflight, d)


def _timer_fired(s: State, d: Mapping[str, Any], ev: Event) -> None:
    if s.timer is None or s.timer["timer_id"] != d["timer_id"]:
        return
    s.timer = None
    if s.status == "waiting" and s.waiting_for == "timer":
        s.status, s.waiting_for, s.status_reason = "running", None, ""


def _schedule_set(s: State, d: Mapping[str, Any], ev: Event) -> None:
    entry = {"digest": d["digest"], "by": d.get("by", ""), "paused": False, "last_due": None}
    s.schedules = {**s.schedules, d["schedule_id"]: entry}


def _schedule_changed(s: State, d: Mapping[str, Any], ev: Event) -> None:
    sid, change = d["schedule_id"], d["change"]
    if sid not in s.schedules:
        return
    if change == "removed":
        s.schedules = {k: v for k, v in s.schedules.items() if k != sid}
    else:
        s.schedules = {**s.schedules, sid: {**s.schedules[sid], "paused": change == "paused"}}


def _schedule_fired(s: State, d: Mapping[str, Any], ev: Event) -> None:
    sid = d["schedule_id"]
    entry = s.schedules.get(sid, {"digest": d.get("digest", ""), "by": d.get("by", "")})
    s.schedules = {**s.schedules, sid: {**entry, "last_due": d["due"]}}
    if s.status == "waiting" and s.waiting_for in ("input", "timer"):
        s.status, s.waiting_for, s.status_reason = "running", None, ""
        s.timer = None


def _hibernated(s: State, d: Mapping[str, Any], ev: Event) -> None:
    # hibernating an agent that already sleeps keeps the status it fell asleep
    # in: "hibernated" is never the status it wakes to
    before = s.hibernated if s.status == "hibernated" and s.hibernated else None
    s.hibernated = {
        "snapshot_id": d["snapshot_id"],
        "status": before["status"] if before else s.status,
        "status_reason": before["status_reason"] if before else s.status_reason,
    }
    s.status, s.status_reason = "hibernated", f"hibernated in snapshot {d['snapshot_id']}"


def _restored(s: State, d: Mapping[str, Any], ev: Event) -> None:
    h = s.hibernated or {}
    if s.status == "hibernated":
        s.status, s.status_reason = h.get("status", "waiting"), h.get("status_reason", "")
    s.hibernated = None


def _born_from(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.agent_id = ev.agent_id
    s.tenant = d["tenant"]
    s.name = d["name"]
    carried = d["state"]
    for name in CARRIED:
        if name in carried:
            setattr(s, name, carried[name])
    s.origin = dict(d["origin"])


def _moved(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.status, s.waiting_for = "moved", None
    written = f", written to {d['path']}" if d.get("path") else ""
    s.status_reason = (
        f"moved out in archive {d['archive_id']}{written}; it runs only where imported"
    )
    s.hibernated = None


def _answer_refused(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.refused_answers += 1
    s.model_requests += len(d.get("attempts", ()))
    if "usage" in d:  # an answer that could not be used still cost its tokens
        s.usage = {"tokens": d["usage"]["total_tokens"], "spend": d["usage"]["total_spend"]}
    _notice(
        s,
        f"your answer at step {d['step']} could not be used: {d['reason']}. "
        "Answer again, by calling tools",
    )


def _context_compacted(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.compaction = {"through": d["through"], "summary": d["summary"]}
    s.model_requests += len(d.get("attempts", ()))
    if "usage" in d:
        s.usage = {"tokens": d["usage"]["total_tokens"], "spend": d["usage"]["total_spend"]}


def _model_changed(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.model_override = {k: d.get(k) for k in ("model", "model_options", "script")}


def _spec_upgraded(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.spec_digest = d["to"]
    if d.get("model_changed"):  # the new spec's model decides from now on
        s.model_override = None


def _result_read(s: State, d: Mapping[str, Any], ev: Event) -> None:
    s.inflight = advance(s.inflight, d)


# the folds of the later kinds (governance and integrity), one function each
KIND_FOLDS: dict[str, Callable[[State, Mapping[str, Any], Event], None]] = {
    Kind.ANSWER_REFUSED: _answer_refused,
    Kind.CONTEXT_COMPACTED: _context_compacted,
    Kind.RESULT_READ: _result_read,
    Kind.MODEL_CHANGED: _model_changed,
    Kind.AUTONOMY_CHANGED: _autonomy_changed,
    Kind.GRANT_ADDED: _grant_added,
    Kind.GRANT_REVOKED: _grant_revoked,
    Kind.APPROVAL_REQUESTED: _approval_requested,
    Kind.APPROVAL_GRANTED: _approval_granted,
    Kind.APPROVAL_DENIED: _approval_closed,
    Kind.APPROVAL_LAPSED: _approval_closed,
    Kind.PROPOSAL_RECORDED: _proposal_recorded,
    Kind.PROPOSAL_ACCEPTED: _proposal_accepted,
    Kind.GOVERNANCE_REFUSED: _governance_refused,
    Kind.IDENTITY_CREATED: _identity_created,
    Kind.MESSAGE_RECEIVED: _message_received,
    Kind.MESSAGE_REFUSED: _message_refused,
    Kind.DELEGATED: _delegated,
    Kind.MESSAGE_SENT: _delegated,
    Kind.GOAL_REJECTED: _goal_rejected,
    Kind.GOAL_SIGNED_OFF: _goal_signed_off,
    Kind.FINISH_REJECTED: _finish_rejected,
    Kind.COMPENSATED: _compensated,
    Kind.COMPENSATION_NEEDED: _compensation_needed,
    Kind.ROLLED_BACK: _rolled_back,
    Kind.SESSION_PROFILED: _session_profiled,
    Kind.VIOLATION: _violation,
    Kind.VIOLATION_CLEARED: _violation_cleared,
    Kind.TIMER_SET: _timer_set,
    Kind.TIMER_FIRED: _timer_fired,
    Kind.SCHEDULE_SET: _schedule_set,
    Kind.SCHEDULE_CHANGED: _schedule_changed,
    Kind.SCHEDULE_FIRED: _schedule_fired,
    Kind.HIBERNATED: _hibernated,
    Kind.RESTORED: _restored,
    Kind.AGENT_FORKED: _born_from,
    Kind.AGENT_IMPORTED: _born_from,
    Kind.AGENT_MOVED: _moved,
    Kind.SPEC_UPGRADED: _spec_upgraded,
}
