"""One activation's spans, built from the hooks and from the events it journals.

The spans form one tree per activation::

    invoke_agent NAME              the activation, from its lease to giving it back
      stead.step                   a step (the part of it this activation ran)
        chat MODEL                 each time the model was asked (GenAI conventions)
        execute_tool TOOL          each call: effect class, verdict, outcome
    stead.approval.wait            a person's answer to an approval, from the request

Nothing here touches the OpenTelemetry context (no span is made "current"):
an activation is a generator that a parked worker resumes on any of its
threads, one step on one thread and the next on another, so a span attached
to one thread's context would be detached on another. Each span is started
with its parent given explicitly and ended by hand.

The model call is measured around the ``yield`` of the ask: that is the time
the agent waited for its answer, wherever the request ran (this thread, or
the parked worker's event loop). The HTTP attempts inside it, which the
decision carries for the journal, become events on the span.

Most of what a span says is read from the events the activation journals
(:meth:`ActivationTrace.observe`), after redaction, and only from the fields
:mod:`.names` lists: the journal already says what happened, so the hooks in
the runtime stay few.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context

from ..errors import InvalidAnswer
from ..journal import Event, Kind
from ..models.base import Decision, Model
from ..state import State
from . import names as n
from .instruments import Instruments

A = TypeVar("A")
log = logging.getLogger(__name__)
Attributes = dict[str, str | bool | int | float]


class _Call:
    """The tool call in progress, as its events tell it."""

    __slots__ = ("call_id", "outcome", "span", "verdict")

    def __init__(self, span: Span, call_id: str) -> None:
        self.span = span
        self.call_id = call_id
        self.outcome = "none"  # nothing journaled: it ended before its result
        self.verdict: str | None = None


class ActivationTrace:
    """A :class:`~.base.Trace` that makes spans on ``tracer`` and records metrics."""

    def __init__(
        self,
        tracer: Tracer,
        instruments: Instruments,
        agent_id: str,
        agent_name: str,
        tenant: str,
    ) -> None:
        self._tracer = tracer
        self._metrics = instruments
        self._name = agent_name
        self._agent: Attributes = {n.AGENT_ID: agent_id, n.AGENT_NAME: agent_name, n.TENANT: tenant}
        # metrics are kept to names: an id per series would be a series per agent
        self._kind: Attributes = {n.AGENT_NAME: agent_name, n.TENANT: tenant}
        self._activation: Span | None = None
        self._step: Span | None = None
        self._call: _Call | None = None
        self._decisions = 0
        self._steps = 0

    def _start(
        self,
        name: str,
        parent: Span | None,
        attributes: Attributes,
        kind: SpanKind = SpanKind.INTERNAL,
        start_time: int | None = None,
    ) -> Span:
        # a root is rooted: never under whatever span a thread happens to hold
        context = set_span_in_context(parent) if parent is not None else Context()
        return self._tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=start_time
        )

    # -- the activation ------------------------------------------------------------

    def activation(self, state: Callable[[], State]) -> AbstractContextManager[None]:
        return self._activation_span(state)

    @contextmanager
    def _activation_span(self, state: Callable[[], State]) -> Iterator[None]:
        # under the caller's span, if a program embedding stead runs the agent in one
        span = self._tracer.start_span(
            f"invoke_agent {self._name}",
            attributes={n.OPERATION: "invoke_agent", **self._agent},
        )
        self._activation = span
        failure: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            failure = exc
            raise
        finally:
            s = state()
            self._end_step(s.status if failure is None else "interrupted")
            self._activation = None  # what a person's hold of the lease does is its own
            span.set_attribute(n.STATUS, s.status)
            if s.waiting_for:
                span.set_attribute(n.WAITING_FOR, s.waiting_for)
            span.set_attribute(n.DECISIONS, self._decisions)
            span.set_attribute(n.STEPS, self._steps)
            if isinstance(failure, GeneratorExit):
                span.set_attribute(n.INTERRUPTED, True)  # its worker stopped asking
            elif failure is not None:
                _failed(span, failure)
            span.end()

    # -- steps ---------------------------------------------------------------------

    def step(self, number: int) -> None:
        if self._step is None:  # a step a person's answer lets go on
            self._step = self._start(
                "stead.step", self._activation, {**self._agent, n.STEP_RESUMED: True}
            )
        self._step.set_attribute(n.STEP, number)

    def _open_step(self) -> Span:
        if self._step is None:
            self._step = self._start(
                "stead.step", self._activation, {**self._agent, n.STEP_RESUMED: False}
            )
        return self._step

    def _end_step(self, outcome: str) -> None:
        span, self._step = self._step, None
        if span is not None:
            span.set_attribute(n.STEP_OUTCOME, outcome)
            span.end()

    # -- the model ------------------------------------------------------------------

    def model_call(self, model: Model, ask: A) -> Generator[A, Decision, Decision]:
        provider, name = n.model_names(model)
        kind: Attributes = {
            n.OPERATION: "chat",
            n.SYSTEM: provider,
            n.PROVIDER: provider,
            n.REQUEST_MODEL: name,
        }
        span = self._start(f"chat {name}", self._open_step(), kind, SpanKind.CLIENT)
        started = time.perf_counter()
        try:
            decision = yield ask
        except BaseException as exc:
            usage = exc.usage if isinstance(exc, InvalidAnswer) else None
            self._answered(span, kind, started, usage, getattr(exc, "attempts", ()), exc)
            raise
        self._answered(span, kind, started, decision.usage, decision.attempts, None)
        return decision

    def _answered(
        self,
        span: Span,
        kind: Attributes,
        started: float,
        usage: Mapping[str, float] | None,
        attempts: Sequence[Any],
        failure: BaseException | None,
    ) -> None:
        metric = dict(kind)
        if failure is None:
            span.set_attribute(n.MODEL_ANSWER, "decision")
        elif isinstance(failure, GeneratorExit):
            span.set_attribute(n.MODEL_ANSWER, "interrupted")
        else:
            # an answer that could not be used is the model's failure too
            refused = isinstance(failure, InvalidAnswer)
            span.set_attribute(n.MODEL_ANSWER, "refused" if refused else "error")
            metric[n.ERROR_TYPE] = type(failure).__name__
            _failed(span, failure)
        for attempt in attempts:
            a = attempt if isinstance(attempt, Mapping) else attempt.to_json()
            seen: Attributes = {n.ATTEMPT_LATENCY: float(a.get("latency_ms") or 0.0)}
            if isinstance(a.get("status"), int):
                seen[n.ATTEMPT_STATUS] = a["status"]
            span.add_event("stead.model.attempt", seen)
        span.set_attribute(n.MODEL_ATTEMPTS, len(attempts))
        if usage:
            for key, attribute, token_type in (
                ("input_tokens", n.INPUT_TOKENS, "input"),
                ("output_tokens", n.OUTPUT_TOKENS, "output"),
            ):
                if key in usage:
                    count = int(usage[key])
                    span.set_attribute(attribute, count)
                    self._metrics.tokens.record(count, {**kind, n.TOKEN_TYPE: token_type})
            if "cached_tokens" in usage:
                span.set_attribute(n.CACHED_TOKENS, int(usage["cached_tokens"]))
            if "tokens" in usage:
                span.set_attribute(n.MODEL_TOKENS, int(usage["tokens"]))
            spend = float(usage.get("spend", 0.0))
            span.set_attribute(n.MODEL_SPEND, spend)
            if spend > 0:
                self._metrics.spend.add(spend, kind)
        self._metrics.model_duration.record(time.perf_counter() - started, metric)
        span.end()

    # -- tools ----------------------------------------------------------------------

    def tool_call(
        self, tool: str, call_id: str, effect: str | None
    ) -> AbstractContextManager[None]:
        return self._tool_call(tool, call_id, effect or "unknown")

    @contextmanager
    def _tool_call(self, tool: str, call_id: str, effect: str) -> Iterator[None]:
        attributes: Attributes = {
            n.OPERATION: "execute_tool",
            n.TOOL_NAME: tool,
            n.TOOL_CALL_ID: call_id,
            n.TOOL_TYPE: "function",
            n.EFFECT: effect,
            **self._agent,
        }
        parent = self._step if self._step is not None else self._activation
        call = _Call(self._start(f"execute_tool {tool}", parent, attributes), call_id)
        self._call = call
        started = time.perf_counter()
        try:
            yield
        except BaseException as exc:
            call.outcome = "interrupted"
            _failed(call.span, exc)
            raise
        finally:
            self._call = None
            call.span.set_attribute(n.OUTCOME, call.outcome)
            if call.verdict is not None:
                call.span.set_attribute(n.VERDICT, call.verdict)
            self._metrics.tool_duration.record(
                time.perf_counter() - started,
                {n.TOOL_NAME: tool, n.EFFECT: effect, n.OUTCOME: call.outcome},
            )
            call.span.end()

    # -- what the journal says ---------------------------------------------------------

    def observe(self, event: Event, approvals: Mapping[str, Mapping[str, Any]]) -> None:
        # called between sealing an event and folding it into the state: a fault
        # here must cost a span, never the agent's journal
        try:
            self._observe(event, approvals)
        except Exception:
            log.exception("telemetry could not record event %s", event.seq)

    def _observe(self, event: Event, approvals: Mapping[str, Mapping[str, Any]]) -> None:
        kind, d = event.kind, event.data
        call = self._call
        if kind == Kind.DECISION:
            self._decisions += 1
            actions = d.get("actions") or []
            step = self._open_step()
            step.set_attribute(n.STEP, int(d.get("step") or 0))
            step.set_attribute(n.STEP_ACTIONS, len(actions))
            step.set_attribute(n.STEP_TOOL_CALLS, sum(a.get("type") == "tool" for a in actions))
        elif kind == Kind.STEP_COMPLETED:
            self._steps += 1
            self._metrics.steps.add(1, self._kind)
            self._end_step("completed")
        elif kind in (Kind.TOOL_INTENT, Kind.TOOL_RESULT):
            if call is not None and d.get("call_id") == call.call_id:
                _called(call, kind, d)
        elif kind == Kind.APPROVAL_REQUESTED:
            self._approval_requested(d, call)
        elif kind in (Kind.APPROVAL_GRANTED, Kind.APPROVAL_DENIED):
            self._approval_answered(event, approvals.get(str(d.get("approval_id"))))

    def _approval_requested(self, d: Mapping[str, Any], call: _Call | None) -> None:
        self._metrics.approvals_pending.add(1, {n.TENANT: self._kind[n.TENANT]})
        asked: Attributes = {n.APPROVAL_ID: str(d.get("approval_id"))}
        if isinstance(d.get("policy_version"), int):
            asked[n.POLICY_VERSION] = d["policy_version"]
        if call is not None and d.get("call_id") == call.call_id:
            call.outcome, call.verdict = "awaiting_approval", "ask"
            call.span.add_event("stead.approval.requested", asked)
        elif self._step is not None:  # a finish held for a person to see
            self._step.add_event("stead.approval.requested", asked)

    def _approval_answered(self, event: Event, asked: Mapping[str, Any] | None) -> None:
        self._metrics.approvals_pending.add(-1, {n.TENANT: self._kind[n.TENANT]})
        answer = "granted" if event.kind == Kind.APPROVAL_GRANTED else "denied"
        waited = 0.0
        if asked is not None and isinstance(asked.get("requested_at"), int | float):
            waited = max(0.0, event.at - float(asked["requested_at"]))
        self._metrics.approval_wait.record(waited, {n.APPROVAL_ANSWER: answer})
        # the journal's clock may be a test's: only the difference is taken from it
        now = time.time_ns()
        attributes: Attributes = {
            **self._agent,
            n.APPROVAL_ID: str(event.data.get("approval_id")),
            n.APPROVAL_ANSWER: answer,
        }
        if asked is not None and asked.get("tool"):
            attributes[n.TOOL_NAME] = str(asked["tool"])
        span = self._start(
            "stead.approval.wait",
            self._activation,
            attributes,
            start_time=now - int(waited * 1e9),
        )
        span.end(end_time=now)


def _called(call: _Call, kind: str, d: Mapping[str, Any]) -> None:
    verdict = d.get("verdict")
    if isinstance(verdict, Mapping) and isinstance(verdict.get("decision"), str):
        call.verdict = verdict["decision"]
        if verdict.get("approval"):
            call.span.set_attribute(n.APPROVAL_ID, str(verdict["approval"]))
    if kind != Kind.TOOL_RESULT:
        return
    if d.get("rerun"):
        call.span.set_attribute(n.RERUN, True)
        call.verdict = call.verdict or "rerun"  # authorised when its intent was journaled
    if d.get("proposed"):
        call.outcome = "proposed"
    elif d.get("blocked"):
        call.outcome = "blocked"
    elif d.get("refused"):
        call.outcome = "refused"
    else:
        call.outcome = "ok" if d.get("ok") else "error"


def _failed(span: Span, failure: BaseException) -> None:
    """Marks ``span`` failed by the exception's class only: its message may quote a
    tool's output or a model's answer."""
    span.set_attribute(n.ERROR_TYPE, type(failure).__name__)
    span.set_status(Status(StatusCode.ERROR, type(failure).__name__))
