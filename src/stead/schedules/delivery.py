"""Delivering a recorded firing: the agent's journal says it happened, exactly once.

A firing is recorded once (:mod:`stead.store.schedule_rows`) and then
delivered, perhaps more than once if a worker dies in between; the journal
makes that harmless. For an agent, delivering appends ``schedule_fired`` (its
state keeps each schedule's latest due time delivered) and the schedule's
message, as its maker's words, in one commit under the agent's lease: a second
delivery of the same due time finds it in the state and appends nothing. For a
fresh agent per run, the agent's id is chosen when the firing is recorded, so
a second delivery finds the agent already made.

Before anything is appended, the schedule must be the one the agent's journal
holds (``schedule_set`` with the same digest, not paused or removed there), so
a row written or edited outside stead wakes nothing; and the overlap policy is
applied when the previous run has not ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import LeaseHeld, NotFound, SteadError
from ..journal import Kind, NewEvent
from ..spec import AgentSpec
from ..state import State
from ..store.schedule_rows import FiringRow, ScheduleRecord
from .book import definition_of, digest_of

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime

_BUSY = ("created", "running", "needs_attention")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of a firing: ``delivered``, ``skipped`` or ``failed`` (with why),
    or None from :func:`deliver` while it must wait (queued, or the agent's lease is held)."""

    state: str
    detail: str
    agent_id: str | None
    ends: bool = False
    """The schedule can never fire again (its agent is gone or finished)."""


_WAIT = Outcome("waiting", "", None)


def busy(state: State) -> bool:
    """Whether the agent's previous run has not ended: it has work, or waits on a person."""
    status = state.status
    if status == "hibernated" and state.hibernated is not None:
        status = state.hibernated.get("status", "waiting")
    return status in _BUSY or (status == "waiting" and state.waiting_for == "approval")


def deliver(rt: Runtime, record: ScheduleRecord, firing: FiringRow) -> Outcome | None:
    """Deliver ``firing`` of ``record`` (see the module's docstring)."""
    if record.agent_id is not None:
        return _to_agent(rt, record, firing, record.agent_id)
    return _to_fresh_agent(rt, record, firing)


def _problem(record: ScheduleRecord, state: State, due: float) -> Outcome | None:
    """Why this firing may not reach the agent, or that it already has; None if it may."""
    entry = state.schedules.get(record.schedule_id)
    if not names(record, due):
        return Outcome("failed", "not a time this schedule names (its row was set by hand)",
                       state.agent_id)  # fmt: skip
    if entry is None or entry.get("digest") != digest_of(record):
        return Outcome("failed", "the agent's journal does not hold this schedule as stored: it "
                       "was made or changed outside stead; remove it and make it again",
                       state.agent_id, ends=True)  # fmt: skip
    last = entry.get("last_due")
    if last is not None and last >= due:
        return Outcome("delivered", "found in the agent's journal", state.agent_id)
    if entry.get("paused"):
        return Outcome("skipped", "the schedule is paused in the agent's journal", state.agent_id)
    if state.is_final:
        return Outcome("failed", f"the agent is {state.status}", state.agent_id, ends=True)
    return None


def names(record: ScheduleRecord, due: float) -> bool:
    """Whether ``due`` is one of the schedule's due times (a row's next due time set by
    hand to another moment would fire an extra run)."""
    following = definition_of(record).after(due - 0.5)
    return following is not None and abs(following - due) < 1e-3


def _to_agent(
    rt: Runtime, record: ScheduleRecord, firing: FiringRow, agent_id: str
) -> Outcome | None:
    try:
        state = rt.store.load_state(agent_id)
    except NotFound:
        return Outcome("failed", f"agent {agent_id} no longer exists", agent_id, ends=True)
    if state.tenant != record.tenant:
        return Outcome("failed", "the agent is not of the schedule's tenant", agent_id, ends=True)
    found = _problem(record, state, firing.due)
    if found is not None:
        return found
    if busy(state):
        return _overlap(record, agent_id, state.status)
    try:
        with rt.hold(agent_id) as act:
            found = _problem(record, act.state, firing.due)  # under the lease, as it is now
            if found is not None:
                return found
            if busy(act.state):
                return _overlap(record, agent_id, act.state.status)
            for event in fired_events(record, firing):
                act.emit_event(event)
            act.flush()
    except LeaseHeld:
        return _overlap(record, agent_id, "running")
    return Outcome("delivered", "", agent_id)


def _overlap(record: ScheduleRecord, agent_id: str | None, status: str) -> Outcome | None:
    if definition_of(record).overlap == "skip":
        return Outcome(
            "skipped", f"the previous run had not ended (the agent was {status})", agent_id
        )
    return None  # queue: delivered once the previous run ends


def _to_fresh_agent(rt: Runtime, record: ScheduleRecord, firing: FiringRow) -> Outcome | None:
    agent_id = firing.agent_id
    if agent_id is None:
        return Outcome("failed", "the firing names no agent to make", None)
    try:
        state: State | None = rt.store.load_state(agent_id)
    except NotFound:
        state = None
    if state is None:
        held = _previous_run(rt, record)
        if held is _WAIT:
            return None
        if held is not None:
            return held
        spec = spec_from_record(record.body.get("spec") or {})
        if spec.tenant != record.tenant:
            return Outcome(
                "failed", "the spec is not of the schedule's tenant", agent_id, ends=True
            )
        try:
            rt.check_loads(spec)
            rt.create(spec, agent_id)
        except SteadError as exc:
            return Outcome("failed", f"the agent could not be made: {exc}", agent_id)
    try:
        with rt.hold(agent_id) as act:
            entry = act.state.schedules.get(record.schedule_id) or {}
            if entry.get("last_due") is None or entry["last_due"] < firing.due:
                for event in fired_events(record, firing):
                    act.emit_event(event)
                act.flush()
    except LeaseHeld:
        return None  # a worker took the new agent at once: told on the next pass
    return Outcome("delivered", "", agent_id)


def _previous_run(rt: Runtime, record: ScheduleRecord) -> Outcome | None:
    """None if the previous run has ended (or there was none); else what the overlap
    policy makes of this firing (:data:`_WAIT` while it is queued; None once the
    previous run is cancelled)."""
    previous = record.last_run
    if previous is None:
        return None
    try:
        state = rt.store.load_state(previous)
    except NotFound:
        return None
    if state.is_final:
        return None
    policy = definition_of(record).overlap
    if policy == "skip":
        return Outcome("skipped", f"the previous run {previous} had not ended", None)
    if policy == "queue":
        return _WAIT
    rt.cancel(previous, f"schedule {record.schedule_id}: the next run fell due")
    return None


def fired_events(record: ScheduleRecord, firing: FiringRow) -> list[NewEvent]:
    """``schedule_fired`` and, if the schedule says something, its message as its maker's."""
    definition = definition_of(record)
    by = str(record.body.get("made_by", ""))
    events = [NewEvent(Kind.SCHEDULE_FIRED, {
        "schedule_id": record.schedule_id, "due": firing.due, "digest": digest_of(record),
        "by": by, "when": definition.when(),
    })]  # fmt: skip
    if definition.message.strip():
        data: dict[str, Any] = {
            "text": definition.message,
            "by": by,
            "schedule_id": record.schedule_id,
        }
        events.append(NewEvent(Kind.INPUT_RECEIVED, data))
    return events


def spec_from_record(record: dict[str, Any]) -> AgentSpec:
    """The spec a stored record was made from (the inverse of ``AgentSpec.to_record``)."""
    limits = record.get("limits") or {}
    fields: dict[str, Any] = {k: v for k, v in record.items() if k != "limits"}
    fields.update(limits)
    for name in ("tools", "goals", "mcp"):
        fields[name] = tuple(fields.get(name) or ())
    if fields.get("scope") is not None:
        fields["scope"] = tuple(fields["scope"])
    known = set(AgentSpec.__dataclass_fields__)
    return AgentSpec(**{k: v for k, v in fields.items() if k in known})
