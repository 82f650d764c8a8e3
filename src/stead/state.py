"""An agent's materialised state, and the pure fold that produces it from events.

``state = fold(events)``: the store saves the result of :func:`apply` in the same
transaction as the events it came from, so resuming an agent loads one row
instead of replaying its history, and any past version can still be rebuilt by
folding the journal up to that version.

The state is bounded by design. It holds the memory, the goal stack, the open
and in-flight calls, the workspace manifest, and only the most recent tool calls
(:data:`RECENT_CALLS`); the full tool-call history stays in the journal. That is
what keeps loading an agent the same cost at ten events and at a hundred
thousand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .canonical import dumps
from .folds import KIND_FOLDS, advance, back_to_wait, trust, use_answer_approval
from .journal import GENESIS_HASH, Event, Kind
from .values import values

RECENT_CALLS = 20
"""How many finished tool calls the state (and so the model's context) keeps."""
STREAK_SHOWN = 10
"""How many of a streak's latest failed calls the state (and a violation) names."""
TAINTED_KEPT = 50
"""How many tainted results the state names (as many as the data-flow rule keeps)."""

STATUSES = (
    "created",
    "running",
    "waiting",
    "needs_attention",
    "hibernated",
    "completed",
    "failed",
    "cancelled",
    "moved",
)
FINAL_STATUSES = ("completed", "failed", "cancelled", "moved")


@dataclass(slots=True)
class State:
    """Everything the runtime needs to continue an agent, as plain JSON-able data."""

    agent_id: str = ""
    tenant: str = "default"
    name: str = ""
    version: int = 0
    head_hash: str = GENESIS_HASH
    status: str = "created"
    status_reason: str = ""
    waiting_for: str | None = None
    decisions: int = 0
    steps_completed: int = 0
    activations: int = 0
    memory: dict[str, Any] = field(default_factory=dict)
    goals: list[dict[str, Any]] = field(default_factory=list)
    inbox: list[str] = field(default_factory=list)
    recent_calls: list[dict[str, Any]] = field(default_factory=list)
    calls_total: int = 0
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    unknown: dict[str, dict[str, Any]] = field(default_factory=dict)
    inflight: dict[str, Any] | None = None
    manifest: dict[str, str] = field(default_factory=dict)
    finish: dict[str, Any] | None = None
    # governance (stead.governance): authority as data, folded from the journal
    autonomy: str = "act_autonomously"
    tool_autonomy: dict[str, str] = field(default_factory=dict)
    grants: dict[str, dict[str, Any]] = field(default_factory=dict)
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    proposals: dict[str, dict[str, Any]] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    seen_messages: dict[str, float] = field(default_factory=dict)
    public_key: str | None = None
    # integrity: violations that suspended the agent and wait for a person
    violations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # what the model reported its decisions cost, in total
    usage: dict[str, float] = field(default_factory=dict)
    # for monitors that look further back than a new activation reads: the latest
    # results marked tainted (data flow) and the failed calls since the last success
    tainted: list[int] = field(default_factory=list)
    failed_in_row: int = 0
    # the model's answers in a row that could not be acted on (reset by a decision)
    refused_answers: int = 0
    # the latest summary of the conversation's older part: {"through": SEQ, "summary": TEXT}
    compaction: dict[str, Any] | None = None
    # HTTP requests its models made, as journaled (where a replay of a recording stands)
    model_requests: int = 0
    # the model a person set since creation: {"model": REF, "model_options": ..., "script": ...}
    model_override: dict[str, Any] | None = None
    # values a person gave (their messages, the calls they approved): trusted where
    # they also appear in untrusted data (stead.values), the latest folds.TRUSTED_KEPT
    trusted_values: list[str] = field(default_factory=list)
    # how values are read and what an approval means (stead.values.VERSION): 1 for
    # agents made before the version was recorded, so their journals fold as before
    provenance: int = 1
    # the latest results of system data with records a person may point at (their seqs)
    system_results: list[int] = field(default_factory=list)
    # the flows the user's task asks for (allow_flow), by id, with their uses spent
    flows_allowed: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed_last: list[int] = field(default_factory=list)
    # what the agent waited for when a monitor suspended it, to wait again once cleared
    suspended_wait: dict[str, Any] | None = None
    # the behaviour baseline sessions are compared with (stead.integrity.drift)
    baseline: dict[str, Any] | None = None
    # hibernation: the timer the agent waits for, and, while it is hibernated (or
    # woken but not yet restored), its snapshot and the status it had
    timer: dict[str, Any] | None = None
    hibernated: dict[str, Any] | None = None
    # where a fork or an imported agent came from
    origin: dict[str, Any] | None = None
    # the schedules a person set on the agent, by id: {"digest", "by", "paused",
    # "last_due"} (stead.schedules): a schedule row the journal does not hold wakes nothing
    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the digest of the spec in force since its last upgrade ("": the one it was born
    # with); left out of the row until set, so rows from before upgrades hash the same
    spec_digest: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in _LEFT_OUT_EMPTY or getattr(self, f.name)
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> State:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in known})

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def open_goals(self) -> list[dict[str, Any]]:
        return [g for g in self.goals if g["status"] == "open"]


_LEFT_OUT_EMPTY = ("schedules", "spec_digest")
"""Fields added since rows were first written: left out of a row while empty, so a
row written before them reads, refolds and hashes as it did."""

CLIP_CHARS = 800
"""How much of a call's arguments and output the state keeps; the journal keeps all."""


def clip(value: Any) -> Any:
    """``value`` if its JSON is short, else the start of its JSON text, marked as cut."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else dumps(value)
    if len(text) <= CLIP_CHARS:
        return value
    return text[:CLIP_CHARS] + f"… [{len(text) - CLIP_CHARS} more characters]"


def _remember_call(s: State, summary: dict[str, Any]) -> None:
    summary = {**summary, "args": clip(summary.get("args")), "output": clip(summary.get("output"))}
    s.recent_calls = [*s.recent_calls, summary][-RECENT_CALLS:]
    s.calls_total += 1


def _use_allowance(s: State, d: Mapping[str, Any]) -> None:
    """A call an allowance let its untrusted values into spends one of its uses."""
    used = (d.get("provenance") or {}).get("allowed_by")
    held = s.flows_allowed.get(str(used)) if used else None
    if held is not None:
        s.flows_allowed = {**s.flows_allowed, str(used): {**held, "used": held["used"] + 1}}


def apply(state: State, ev: Event) -> State:
    """Return the state after ``ev``. Pure: ``state`` is not changed."""
    return apply_in_place(replace(state), ev)


def apply_in_place(s: State, ev: Event) -> State:
    """Apply ``ev`` to ``s`` itself and return it.

    Only the top-level object changes: every container in it is replaced, never
    mutated, so anything that kept a reference to an earlier container still
    sees the earlier value. For a writer that owns its state object (an
    activation); everyone else uses :func:`apply`.
    """
    if s.status == "hibernated" and ev.kind not in _HIBERNATION_KINDS:
        return _apply_while_hibernated(s, ev)
    d: Mapping[str, Any] = ev.data
    k = ev.kind
    if k == Kind.AGENT_CREATED:
        s.agent_id = ev.agent_id
        s.tenant = d["tenant"]
        s.name = d["name"]
        s.goals = [
            {"id": g["id"], "description": g.get("description", ""), "status": "open"}
            for g in d.get("goals", [])
        ]
        s.manifest = dict(d.get("manifest", {}))
        s.provenance = int(d.get("provenance", 1))
        s.autonomy = d.get("autonomy", "act_autonomously")
        s.tool_autonomy = dict(d.get("tool_autonomy", {}))
    elif k == Kind.ACTIVATION_STARTED:
        s.activations += 1
        stuck = s.unknown or s.violations  # only a person's answer frees these
        if s.status in ("created", "running") or (s.status == "needs_attention" and not stuck):
            s.status, s.status_reason = "running", ""
            s.refused_answers = 0  # a resumed model gets its full allowance again
    elif k == Kind.DECISION:
        s.decisions += 1
        s.refused_answers = 0
        s.model_requests += len(d.get("attempts", ()))
        if "usage" in d:
            s.usage = {"tokens": d["usage"]["total_tokens"], "spend": d["usage"]["total_spend"]}
        s.inbox = []
        s.inflight = {
            "seq": ev.seq,
            "step": d["step"],
            "context_hash": d["context_hash"],
            "actions": d["actions"],
            "next": 0,
        }
    elif k == Kind.TOOL_INTENT:
        _use_allowance(s, d)
        _use_verdict(s, d)
        s.pending = {
            **s.pending,
            d["call_id"]: {
                key: d[key] for key in ("tool", "args", "effect", "idempotency_key", "action")
            },
        }
    elif k == Kind.TOOL_RESULT:
        _use_allowance(s, d)
        _use_verdict(s, d)
        s.pending = {c: v for c, v in s.pending.items() if c != d["call_id"]}
        _remember_call(
            s,
            {
                "call_id": d["call_id"],
                "tool": d["tool"],
                "args": d["args"],
                "ok": d["ok"],
                # what the model was shown: hidden parts as handles (stead.integrity.handles)
                "output": d["shown"] if "shown" in d and d["ok"] else d.get("output"),
                "error": d["shown"] if "shown" in d and not d["ok"] else d.get("error"),
                "seq": ev.seq,  # for provenance: which result a later call drew on
            },
        )
        _apply_delta(s, d)
        s.inflight = advance(s.inflight, d)
        if d.get("tainted"):
            s.tainted = [*s.tainted, ev.seq][-TAINTED_KEPT:]
        if d.get("system"):
            s.system_results = [*s.system_results, ev.seq][-TAINTED_KEPT:]
        if not d.get("refused"):
            s.failed_in_row = 0 if d["ok"] else s.failed_in_row + 1
            s.failed_last = [] if d["ok"] else [*s.failed_last, ev.seq][-STREAK_SHOWN:]
    elif k == Kind.OUTCOME_UNKNOWN:
        call = s.pending.get(d["call_id"], {})
        s.pending = {c: v for c, v in s.pending.items() if c != d["call_id"]}
        s.unknown = {**s.unknown, d["call_id"]: {**call, "reason": d.get("reason", "")}}
        s.status, s.status_reason = "needs_attention", d.get("reason", "outcome unknown")
    elif k == Kind.CALL_RESOLVED:
        call = s.unknown.get(d["call_id"], {})
        s.unknown = {c: v for c, v in s.unknown.items() if c != d["call_id"]}
        if d["resolution"] in ("done", "abort"):
            ok = d["resolution"] == "done"
            _remember_call(
                s,
                {
                    "call_id": d["call_id"],
                    "tool": call.get("tool"),
                    "args": call.get("args"),
                    "ok": ok,
                    "output": d.get("output"),
                    "error": None if ok else f"aborted by {d.get('by', 'a person')}",
                },
            )
            s.inflight = advance(s.inflight, d)
        if not s.unknown and not s.violations and s.status == "needs_attention":
            back_to_wait(s)
    elif k == Kind.MEMORY_WRITTEN:
        s.memory = {**s.memory, **d["values"]}
        s.inflight = advance(s.inflight, d)
    elif k == Kind.GOAL_PUSHED:
        s.goals = [
            *s.goals,
            {"id": d["id"], "description": d.get("description", ""), "status": "open"},
        ]
        s.inflight = advance(s.inflight, d)
    elif k == Kind.GOAL_COMPLETED:
        s.goals = [{**g, "status": "completed"} if g["id"] == d["id"] else g for g in s.goals]
        s.inflight = advance(s.inflight, d)
    elif k == Kind.INPUT_REQUESTED:
        s.status, s.waiting_for, s.status_reason = "waiting", "input", d.get("prompt", "")
        s.inflight = advance(s.inflight, d)
    elif k == Kind.INPUT_RECEIVED:
        s.inbox = [*s.inbox, d["text"]]
        trust(s, values(d["text"], s.provenance))
        if s.status == "waiting" and s.waiting_for == "input":
            s.status, s.waiting_for, s.status_reason = "running", None, ""
    elif k == Kind.FINISH_CLAIMED:
        use_answer_approval(s, d)
        s.finish = {"summary": d.get("summary", "")}
        s.status, s.status_reason = "completed", d.get("summary", "")
        s.inflight = advance(s.inflight, d)
    elif k == Kind.STEP_COMPLETED:
        _apply_delta(s, d)
        s.steps_completed += 1
        s.inflight = None
    elif k == Kind.STATUS_CHANGED:
        s.status, s.status_reason = d["status"], d.get("reason", "")
        s.model_requests += len(d.get("attempts", ()))
        if d["status"] != "waiting":
            s.waiting_for = None
        if d["status"] != "needs_attention":
            s.suspended_wait = None  # set explicitly: no wait to go back to
    elif k == Kind.FLOW_ALLOWED:
        s.inflight = advance(s.inflight, d)
        if d.get("ok"):
            allowance = d["allowance"]
            s.flows_allowed = {**s.flows_allowed, allowance["id"]: dict(allowance)}
    elif k == Kind.QUERY_ANSWERED:
        s.inflight = advance(s.inflight, d)
        s.model_requests += len(d.get("attempts", ()))
        if "usage" in d:  # the reader's tokens and spend count in the agent's budget
            s.usage = {"tokens": d["usage"]["total_tokens"], "spend": d["usage"]["total_spend"]}
        if d.get("ok"):  # a reader's answer keeps the hidden text's origin past a restart
            s.tainted = [*s.tainted, ev.seq][-TAINTED_KEPT:]
    elif k in KIND_FOLDS:
        KIND_FOLDS[k](s, d, ev)
    # WORKSPACE_RESTORED and RECONCILED are records only: the manifest they
    # restore to, or the answer they carry, is already reflected elsewhere.
    s.version = ev.seq
    s.head_hash = ev.hash
    return s


def _use_verdict(s: State, d: Mapping[str, Any]) -> None:
    """Count a grant's use and consume an approval, as journaled with the call."""
    verdict = d.get("verdict")
    if not verdict or verdict.get("decision") != "allow":
        return
    gid = verdict.get("grant")
    if gid in s.grants:
        g = s.grants[gid]
        s.grants = {**s.grants, gid: {**g, "uses": g.get("uses", 0) + 1}}
    if verdict.get("approval"):
        s.approvals = {a: v for a, v in s.approvals.items() if a != verdict["approval"]}


_HIBERNATION_KINDS = frozenset({Kind.HIBERNATED, Kind.RESTORED, Kind.AGENT_MOVED})


def _apply_while_hibernated(s: State, ev: Event) -> State:
    """An event for a hibernated agent: applied to the status it had when it slept.

    If the event gives it work (input, an answered approval, a fired timer), it
    is woken: its status is the new one, and the snapshot stays named in
    ``hibernated`` until the next activation restores (and consumes) it.
    Otherwise it stays hibernated, remembering the new status for its waking.
    """
    h = s.hibernated or {}
    slept_in = h.get("status", "waiting")
    s.status = "waiting" if slept_in == "hibernated" else slept_in
    s.status_reason = h.get("status_reason", "")
    apply_in_place(s, ev)
    if s.status in ("running", "created") or s.is_final:
        s.hibernated = {**h, "woken": True}
    else:
        s.hibernated = {**h, "status": s.status, "status_reason": s.status_reason}
        s.status, s.status_reason = "hibernated", f"hibernated in snapshot {h.get('snapshot_id')}"
    return s


def _apply_delta(s: State, d: Mapping[str, Any]) -> None:
    changed = d.get("changed")
    removed = d.get("removed")
    if not changed and not removed:
        return
    manifest = dict(s.manifest)
    manifest.update(changed or {})
    for path in removed or ():
        manifest.pop(path, None)
    s.manifest = manifest


def fold(events: Iterable[Event], state: State | None = None) -> State:
    """Fold events, in order, onto ``state`` (or an empty state)."""
    s = replace(state) if state is not None else State()
    for ev in events:
        apply_in_place(s, ev)
    return s
