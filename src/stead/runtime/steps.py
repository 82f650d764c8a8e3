"""The step loop: ask the model for a decision, journal it, act on it, end the step.

A step is one decision and its actions, in order: tool calls (run by
:mod:`.toolcall`), memory writes, goals pushed or claimed complete (checked by
:mod:`stead.integrity.completion`), a finish claim, a wait for input or a timer,
and messages or delegations to other agents. A step stops early when a call
waits for a person's approval or a monitor suspends the agent; it goes on from
that action once a person has answered. Between steps the loop takes people's
requests (a quarantine) and flushes what has waited too long.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..canonical import dumps
from ..errors import ContextTooLong, InvalidAnswer, ModelError
from ..ids import new_id
from ..integrity.allowances import allow_flow
from ..integrity.hiding import answer_query
from ..journal import Kind
from ..models.accounting import attempt_fields, usage_fields
from ..models.base import Decision, Model, RenderedContext
from ..models.conversation import RESULT_CAP, read_on
from ..models.speech import WHY_CAP, spoken
from ..models.summaries import Beside
from .compaction import ask_beside, compact, land
from .governed import is_escalation
from .toolcall import run_tool

if TYPE_CHECKING:
    from .activation import Activation

T = TypeVar("T")
MAX_UNFLUSHED_SECONDS = 1.0
"""Flush before asking the model once this long has passed since the last flush."""
SIGNAL_SECONDS = 0.5
"""How often a running activation looks for people's requests (a quarantine)."""
DEFAULT_INVALID_ANSWERS = 3
"""Unusable answers in a row after which a model that does not say otherwise stops."""


@dataclass(frozen=True, slots=True)
class Ask:
    """What a paused activation waits for: ``model``'s decision on ``context``."""

    model: Model
    context: RenderedContext


Machine = Generator[Ask, Decision, T]
"""An activation as a generator: it yields an :class:`Ask` wherever it needs a
decision and is sent the decision (or has the model's error thrown in there), so
a worker can park it while the model thinks, without a thread (see
:mod:`stead.runtime.parked`); :func:`answer_inline` asks in the caller's thread."""


def answer_inline(machine: Machine[T]) -> T:
    """Run ``machine`` to its end, asking each model in this thread."""
    try:
        ask = next(machine)
        while True:
            ask = answered(machine, ask)
    except StopIteration as done:
        return cast(T, done.value)
    finally:
        machine.close()  # interrupted: its own finally blocks give the lease back


def answered(machine: Machine[T], ask: Ask) -> Ask:
    """Ask ``ask``'s model in this thread and give the machine the answer (or the
    model's error, raised where it asked); return its next question."""
    try:
        decision = ask.model.decide(ask.context)
    except Exception as exc:
        return machine.throw(exc)
    return machine.send(decision)


def run_steps(act: Activation, max_steps: int | None = None) -> int:
    """Run steps while the agent is running; return how many decisions were made."""
    return answer_inline(step_machine(act, max_steps))


def step_machine(
    act: Activation, max_steps: int | None = None, stop: Callable[[], bool] | None = None
) -> Machine[int]:
    """:func:`run_steps` as a :data:`Machine`. Once ``stop()`` says so (a worker told
    to stop), it ends after the step it is in, its events committed, and the agent
    goes on from there wherever it is run next."""
    limit = int(act.record.spec.get("limits", {}).get("max_steps", 1000))
    made = 0
    while act.state.status == "running":
        if act.state.inflight is None:
            if (max_steps is not None and made >= max_steps) or (stop is not None and stop()):
                break
            if act.state.steps_completed >= limit:
                act.emit(
                    Kind.STATUS_CHANGED,
                    status="failed",
                    reason=f"reached the spec's limit of {limit} steps without finishing",
                )
                act.flush()
                break
            if not (yield from decide(act)):
                break
            made += 1
            if act.state.inflight is None:
                continue  # the answer was refused: the model is asked again
        execute_inflight(act)
    if act.watch is not None:
        act.watch.end_session()  # committed with the activation's last events
    act.flush()
    return made


def take_signals(act: Activation) -> None:
    """Journal what people asked for while this worker held the lease (a quarantine).

    Looked for at most every :data:`SIGNAL_SECONDS`, so a request stops a
    running agent within about that long, without a query on every step.
    """
    now = act.clock.now()
    if now - act.signals_at < SIGNAL_SECONDS:
        return
    act.signals_at = now
    waiting = act.store.signals(act.record.agent_id)
    if not waiting:
        return
    open_ = set(act.state.violations)
    for signal_id, data in waiting:
        if data.get("kind") == Kind.MODEL_CHANGED:
            swap_model(act, {k: v for k, v in data.items() if k != "kind"})
        elif signal_id not in open_:  # not already journaled before a crash
            act.emit(Kind.VIOLATION, **data)
    act.flush()
    act.store.drop_signals(act.record.agent_id, [sid for sid, _ in waiting])


def swap_model(act: Activation, change: dict[str, Any]) -> None:
    """A person's ``stead model set`` while this worker runs the agent: journaled, and
    the next decision is asked of the new model (built here, unless the program
    running the agent passed its own, which it keeps)."""
    act.emit(Kind.MODEL_CHANGED, **change)
    act.flush()  # the new model's conversation is rebuilt from the journal
    if act.rebuild_model is not None:
        act.use_model(act.rebuild_model(act.state))


def decide(act: Activation) -> Machine[bool]:
    if act.buffer and act.clock.now() - act.flushed_at > MAX_UNFLUSHED_SECONDS:
        act.flush()
    take_signals(act)
    if act.state.status != "running":
        return False
    asked: list[Beside | None] = [None]
    going = yield from _decide(act, asked)
    if asked[0] is not None:  # a summary asked beside the decision: journaled after it
        land(act, asked[0])
    return going


def _decide(act: Activation, asked: list[Beside | None]) -> Machine[bool]:
    try:
        context = compact(act, act.renderer.render(act.state))
        asked[0] = ask_beside(act, context)
        try:
            decision = yield from act.trace.model_call(act.model, Ask(act.model, context))
        except ContextTooLong as exc:
            shorter = compact(act, context, force=True, failed=exc.attempts)  # one more try
            if shorter is context:
                raise
            context = shorter
            decision = yield from act.trace.model_call(act.model, Ask(act.model, context))
    except InvalidAnswer as exc:
        return refuse_answer(act, context.hash, exc)
    except ModelError as exc:
        act.emit(
            Kind.STATUS_CHANGED,
            status="needs_attention",
            reason=f"model {act.model.name} gave no decision: {exc}",
            **attempt_fields(exc.attempts),
        )
        act.flush()
        return False
    try:  # a text answer: the agent speaking, as the spec's on_text says
        planned = spoken(decision, act.record.spec.get("on_text"))
    except InvalidAnswer as exc:
        return refuse_answer(act, context.hash, exc)
    actions = []
    for action in planned:
        if action["type"] in ("tool", "message", "delegate", "finish"):
            action = {**action, "call_id": new_id("call", act.clock, act.rng)}
        actions.append(action)
    act.emit(
        Kind.DECISION,
        step=act.state.decisions + 1,
        context_hash=context.hash,
        model=act.model.name,
        actions=actions,
        **({"text": decision.text[:WHY_CAP]} if decision.text else {}),
        # provenance: the results this decision's context showed
        context_events=[c["seq"] for c in act.state.recent_calls if "seq" in c],
        **usage_fields(act.state.usage, decision.usage),
        **attempt_fields(decision.attempts),
    )
    # not flushed yet: it is committed with the first intent, before any effect.
    # A monitor may have suspended the agent on this very decision (a budget it
    # crosses): then none of its actions run until a person clears that.
    return act.state.status == "running"


def refuse_answer(act: Activation, context_hash: str, exc: InvalidAnswer) -> bool:
    """Journal an answer that cannot be acted on; the model is shown why next time.

    After the model's limit of such answers in a row (``invalid_answers``,
    default 3) the agent stops in ``needs_attention``, saying why. Returns True
    while the model may be asked again.
    """
    act.emit(
        Kind.ANSWER_REFUSED,
        step=act.state.decisions + 1,
        context_hash=context_hash,
        model=act.model.name,
        reason=str(exc),
        answer=exc.answer,
        **usage_fields(act.state.usage, exc.usage),
        **attempt_fields(exc.attempts),
    )
    limit = int(getattr(act.model, "invalid_answers", DEFAULT_INVALID_ANSWERS))
    if act.state.refused_answers >= limit:
        act.emit(
            Kind.STATUS_CHANGED,
            status="needs_attention",
            reason=f"model {act.model.name} gave {act.state.refused_answers} answers in a row "
            f"that could not be used (the last: {exc}); change the model or the instructions, "
            f"then `stead resume {act.record.agent_id}`",
        )
    act.flush()
    return act.state.status == "running"


def execute_inflight(act: Activation) -> None:
    inflight = act.state.inflight
    assert inflight is not None
    act.trace.step(inflight["step"])
    actions: list[dict[str, Any]] = inflight["actions"]
    for index in range(inflight["next"], len(actions)):
        action = actions[index]
        kind = action["type"]
        if kind == "tool":
            run_tool(act, index, action)
        elif kind == "remember":
            act.emit(Kind.MEMORY_WRITTEN, action=index, values=action["values"])
        elif kind == "push_goal":
            act.emit(
                Kind.GOAL_PUSHED,
                action=index,
                id=action["id"],
                description=action.get("description", ""),
            )
        elif kind == "complete_goal":
            act.verifier.complete_goal(index, action["id"])
        elif kind == "finish":
            # a claim: accepted only if it is true now (see .completion); where the
            # spec asks, a person first sees an answer that repeats untrusted text,
            # or gets it with the values it repeats from such text withheld
            summary, seen, held = (
                (action.get("summary", ""), {}, None)
                if act.watch is None
                else act.watch.answer(index, action, act.governor.policy_version())
            )
            if held is not None:
                act.governor.hold(index, *held)
            else:
                act.verifier.finish(index, summary, seen)
        elif kind == "wait_for_input":
            prompt, told = (
                act.watch.told(action.get("prompt", ""))
                if act.watch is not None
                else (action.get("prompt", ""), {})
            )
            said = {"said": True} if action.get("said") else {}  # the agent's own words
            act.emit(Kind.INPUT_REQUESTED, action=index, prompt=prompt, **told, **said)
        elif kind == "wait":
            due = action["until"] if "until" in action else act.clock.now() + action["seconds"]
            act.emit(
                Kind.TIMER_SET,
                action=index,
                timer_id=new_id("tmr", act.clock, act.rng),
                due_at=float(due),
                reason=action.get("reason", ""),
            )
        elif is_escalation(kind):
            act.governor.refuse_escalation(index, action)
        elif kind in ("message", "delegate"):
            send(act, index, action)
        elif kind == "read_result":
            read_result(act, index, action)
        elif kind == "query":
            answer_query(act, index, action)
        elif kind == "allow_flow":
            rule = act.watch.monitors.dataflow() if act.watch is not None else None
            allow_flow(act, rule, index, action)
        if act.state.status == "waiting" and act.state.waiting_for == "approval":
            return  # the step goes on from this action once a person has answered
        if act.state.status == "needs_attention":
            return  # suspended by a monitor: the rest waits until a person clears it
    step_delta = act.scan_delta() if act.dirty else {}
    act.emit(Kind.STEP_COMPLETED, step=inflight["step"], **step_delta)


def send(act: Activation, index: int, action: dict[str, Any]) -> None:
    """A message or delegation to another agent, committed before it leaves."""
    kind = Kind.DELEGATED if action["type"] == "delegate" else Kind.MESSAGE_SENT
    if act.messenger is None:
        act.emit(
            kind,
            action=index,
            call_id=action["call_id"],
            to=action["to"],
            ok=False,
            error="this runtime cannot deliver messages between agents",
        )
        return
    act.flush()  # a crash after delivery re-sends the same message id: a replay, refused
    outcome = act.messenger(act, action)
    act.emit(kind, action=index, call_id=action["call_id"], to=action["to"], **outcome)


def read_result(act: Activation, index: int, action: dict[str, Any]) -> None:
    """The next part of a journaled tool result the conversation showed cut."""
    call, offset = str(action["call"]), int(action.get("offset", 0))
    transcript = act.renderer.transcript
    seq = transcript.cut_results.get(call) if transcript is not None else None
    # not yet committed (a read-only call's result waits for the next commit), or stored
    events = [e for e in act.buffer if e.seq == seq]
    if seq is not None and not events and 1 <= seq <= act.committed_version:
        events = list(act.store.read_events(act.record.agent_id, seq, seq))
    if not events or events[0].kind != Kind.TOOL_RESULT or not events[0].data.get("ok"):
        text = f"there is no cut result of call {call} in the conversation"
    else:
        output = events[0].data.get("output")
        whole = output if isinstance(output, str) else dumps(output)
        text = whole[offset : offset + RESULT_CAP]
        if offset + RESULT_CAP < len(whole):
            text += read_on(call, offset + RESULT_CAP, len(whole) - offset - RESULT_CAP)
    act.emit(Kind.RESULT_READ, action=index, call=call, seq=seq, offset=offset, text=text)
