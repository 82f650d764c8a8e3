"""Monitors: rules over the journal as it grows, that warn, block a call, or suspend.

A :class:`MonitorSet` is fed every event an agent's journal receives
(:meth:`MonitorSet.observe`) and is asked about each tool call just before it
runs (:meth:`MonitorSet.check_call`, after the governance gate). Each rule
answers nothing or a :class:`Violation` with a verdict:

``warn``
    journaled, the call runs;
``block``
    the call does not run; the model sees why;
``suspend``
    the agent stops in ``needs_attention`` until a person clears the
    violation (``stead clear ID VIOLATION``).

Rules only read events, so the same rules run over a stored journal after the
fact (:func:`replay`, ``stead check ID``) and report what the live run did.

Built in (all configurable under ``monitors:`` in the spec; ``off: true``
disables one):

``loop``
    the same tool with the same arguments ``repeat`` times in a row (default
    10): the next identical call is blocked;
``error_streak``
    ``errors`` failed calls in a row (default 10): suspend (a circuit breaker),
    and again every ``errors`` failures while the streak goes on;
``budget``
    at most ``tool_calls`` per ``window`` seconds (block), ``steps``,
    ``wall_seconds`` since creation, ``tokens`` and ``spend`` reported with
    decisions (suspend);
``dataflow``
    text from the result of a secret-bearing or ``untrusted`` tool appearing in
    the arguments of an ``outbound`` tool, without an approval: block;
``probing``
    ``refusals`` refused calls within ``window`` seconds (default 10 in 600):
    suspend;
``drift``
    a session (one activation of at least ``min_steps`` decisions) whose
    behaviour moved from the baseline of the first ``baseline_sessions``
    beyond a threshold (see :mod:`.drift`): warn, and, with ``demote_to``,
    lower the agent's autonomy to that level (journaled).

Custom rules: ``{sequence: [A, B], within: SECONDS, verdict: V}`` (B called
within the time after A), ``{count: PATTERN, max: N, window: SECONDS,
verdict: V}``, or ``{python: "module:function"}``, a function
``f(event, call) -> (verdict, message) | None`` called with each event (and
``call=None``) and with each proposed call (and ``event=None``).
"""

from __future__ import annotations

import fnmatch
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..canonical import dumps, sha256_hex
from ..journal import Event, Kind
from ..state import STREAK_SHOWN, TAINTED_KEPT
from ..values import values
from .drift import DEFAULT_THRESHOLDS, drifted

VERDICTS = ("warn", "ask", "block", "suspend")
MIN_FLOW_CHARS = 8
"""Shorter strings are not traced from a result into a later call's arguments."""


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    verdict: str
    message: str
    events: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "verdict": self.verdict,
            "message": self.message,
            "events": list(self.events),
        }


@dataclass(frozen=True, slots=True)
class Call:
    """A call about to run, as monitors see it."""

    call_id: str
    tool: str
    args: Mapping[str, Any]
    at: float
    approved: bool = False


class Rule:
    """One monitor. Subclasses override what they need; both default to no violation."""

    name = "rule"
    kinds: frozenset[str] | None = None
    """The event kinds :meth:`observe` looks at (None: all), so others skip it."""

    def observe(self, ev: Event) -> Violation | None:
        return None

    def check(self, call: Call) -> Violation | None:
        return None


def _ran(ev: Event, pattern: str = "*") -> bool:
    """Whether ``ev`` is the result of a call that ran (not one refused or blocked)."""
    return (
        ev.kind == Kind.TOOL_RESULT
        and not ev.data.get("refused")
        and fnmatch.fnmatchcase(ev.data["tool"], pattern)
    )


def _args_key(tool: str, args: Any) -> str:
    return sha256_hex(tool + "\n" + dumps(args))


class Loop(Rule):
    name = "loop"
    kinds = frozenset({Kind.TOOL_RESULT})

    def __init__(self, repeat: int = 10) -> None:
        self.repeat = repeat
        self.last: str | None = None
        self.seqs: list[int] = []

    def observe(self, ev: Event) -> Violation | None:
        if _ran(ev):
            key = _args_key(ev.data["tool"], ev.data.get("args"))
            self.seqs = [*self.seqs, ev.seq] if key == self.last else [ev.seq]
            self.last = key
        return None

    def check(self, call: Call) -> Violation | None:
        if _args_key(call.tool, call.args) == self.last and len(self.seqs) >= self.repeat - 1:
            return Violation(
                self.name,
                "block",
                f"{call.tool} with the same arguments {len(self.seqs) + 1} times in a row: "
                "a loop; try something different",
                tuple(self.seqs[-(self.repeat - 1) :]),
            )
        return None


class ErrorStreak(Rule):
    name = "error_streak"
    kinds = frozenset({Kind.TOOL_RESULT})

    def __init__(self, errors: int = 10) -> None:
        self.errors = errors
        self.streak: list[int] = []
        self.failed = 0

    def observe(self, ev: Event) -> Violation | None:
        if ev.kind != Kind.TOOL_RESULT or ev.data.get("refused"):
            return None
        if ev.data.get("ok"):
            self.streak, self.failed = [], 0
            return None
        # only the latest failures are named: one streak can be as long as it likes
        self.streak = [*self.streak, ev.seq][-min(self.errors, STREAK_SHOWN) :]
        self.failed += 1
        # trips again every ``errors`` failures, so a person who clears it and
        # lets the agent fail on does not switch the breaker off
        if self.failed % self.errors == 0:
            return Violation(
                self.name,
                "suspend",
                f"{self.failed} tool calls failed in a row; a person should look before it goes on",
                tuple(self.streak),
            )
        return None


class Budget(Rule):
    name = "budget"

    def __init__(
        self,
        tool_calls: int | None = None,
        window: float = 3600.0,
        steps: int | None = None,
        wall_seconds: float | None = None,
        tokens: int | None = None,
        spend: float | None = None,
    ) -> None:
        self.tool_calls, self.window = tool_calls, window
        self.limits = {"steps": steps, "wall_seconds": wall_seconds, "tokens": tokens,
                       "spend": spend}  # fmt: skip
        self.used: dict[str, float] = {"steps": 0, "tokens": 0, "spend": 0, "wall_seconds": 0}
        self.started: float | None = None  # the agent's creation (see MonitorSet.start)
        self.calls: deque[tuple[float, int]] = deque()
        self.tripped: set[str] = set()

    def observe(self, ev: Event) -> Violation | None:
        # totals are read from the events themselves (a decision carries its step
        # number and the running cost), so a rule primed with only the latest
        # events counts exactly as one that saw the whole journal
        if self.started is None and ev.seq == 1:
            self.started = ev.at
        if _ran(ev):
            self.calls.append((ev.at, ev.seq))
        if ev.kind == Kind.DECISION:
            usage = ev.data.get("usage") or {}
            self.used["steps"] = ev.data["step"]
            self.used["tokens"] = float(usage.get("total_tokens", self.used["tokens"]))
            self.used["spend"] = float(usage.get("total_spend", self.used["spend"]))
        if self.started is not None:
            self.used["wall_seconds"] = ev.at - self.started
        for what, limit in self.limits.items():
            if limit is not None and self.used[what] > limit and what not in self.tripped:
                self.tripped.add(what)
                return Violation(
                    self.name,
                    "suspend",
                    f"the {what} budget of {limit:g} is spent ({self.used[what]:g})",
                    (ev.seq,),
                )
        return None

    def check(self, call: Call) -> Violation | None:
        if self.tool_calls is None:
            return None
        while self.calls and self.calls[0][0] <= call.at - self.window:
            self.calls.popleft()
        if len(self.calls) >= self.tool_calls:
            return Violation(
                self.name,
                "block",
                f"{len(self.calls)} tool calls in the last {self.window:g} s reach the "
                f"budget of {self.tool_calls}; wait or ask a person to raise it",
                tuple(seq for _, seq in self.calls),
            )
        return None


class DataFlow(Rule):
    """Text or values from a secret-bearing or untrusted result in an outbound call.

    What the person gave is trusted: values in the agent's instructions and
    goals (``trusted``), in a person's messages and in the arguments of calls a
    person approved. A value found both there and in untrusted data is the
    person's, so it flows freely; anything else from untrusted data does not,
    unless a person approves the call (``verdict`` ``ask``, or ``block``).
    """

    name = "dataflow"
    kinds = frozenset({Kind.TOOL_RESULT, Kind.INPUT_RECEIVED, Kind.APPROVAL_REQUESTED,
                       Kind.APPROVAL_GRANTED})  # fmt: skip

    def __init__(
        self,
        untrusted: Iterable[str] = (),
        outbound: Iterable[str] = (),
        verdict: str = "block",
        trusted: Iterable[str] = (),
    ) -> None:
        # tool names or patterns (fnmatch) whose results are third-party text
        self.untrusted = sorted(set(untrusted))
        self.outbound = list(outbound)
        self.verdict = verdict
        self.trusted = set(trusted)
        self.tainted: list[tuple[int, set[str], set[str]]] = []
        self._asked: dict[str, set[str]] = {}  # approval id -> its call's values

    def taints(self, data: Mapping[str, Any]) -> bool:
        """Whether a tool result (its event data) holds text that must not flow out.

        Only a result with some text long enough to trace counts: one that
        holds none is not remembered, so it never pushes out one that does.
        """
        if not data.get("ok"):
            return False
        output = data.get("output")
        untrusted = any(fnmatch.fnmatchcase(str(data["tool"]), p) for p in self.untrusted)
        if not untrusted and "[secret:" not in dumps(output):
            return False
        return any(True for _ in _strings(output))

    def _entry(self, ev: Event) -> tuple[int, set[str], set[str]]:
        output = ev.data.get("output")
        return ev.seq, set(_strings(output)), values(output)

    def observe(self, ev: Event) -> Violation | None:
        d = ev.data
        if ev.kind == Kind.TOOL_RESULT and self.taints(d):
            self.tainted = [*self.tainted, self._entry(ev)][-TAINTED_KEPT:]
        elif ev.kind == Kind.INPUT_RECEIVED:
            self.trusted |= values(d.get("text"))
        elif ev.kind == Kind.APPROVAL_REQUESTED:
            self._asked[str(d.get("approval_id"))] = values(d.get("args"))
        elif ev.kind == Kind.APPROVAL_GRANTED:
            self.trusted |= self._asked.pop(str(d.get("approval_id")), set())
        return None

    def resume(self, earlier: Iterable[Event], trusted: Iterable[str] = ()) -> None:
        """Take back tainted results older than the events this rule was primed with,
        and the values people gave before then (as the state keeps them)."""
        seen = {seq for seq, _, _ in self.tainted}
        older = [self._entry(ev) for ev in earlier if ev.seq not in seen and self.taints(ev.data)]
        self.tainted = [*older, *self.tainted][-TAINTED_KEPT:]
        self.trusted |= set(trusted)

    def _own(self, text: str) -> bool:
        """Whether ``text`` is what a person gave (all its values are trusted)."""
        found = values(text)
        return bool(found) and found <= self.trusted

    def sources(self, args: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Where each argument's values came from: ``untrusted`` (the results named in
        ``from``), ``trusted`` (all of them a person gave), or ``model`` (neither)."""
        out: dict[str, dict[str, Any]] = {}
        for name, value in args.items():
            text = dumps(value)
            parts, found = set(_strings(value)), values(value)
            seqs = [
                seq
                for seq, strings, tainted in self.tainted
                if (tainted & found) - self.trusted
                or any(s in text and not self._own(s) for s in strings)
                or any(p in s and not self._own(p) for p in parts for s in strings)
            ]
            if seqs:
                out[str(name)] = {"source": "untrusted", "from": seqs}
            elif found and found <= self.trusted:
                out[str(name)] = {"source": "trusted"}
            else:
                out[str(name)] = {"source": "model"}
        return out

    def check(self, call: Call) -> Violation | None:
        if call.approved or not any(fnmatch.fnmatchcase(call.tool, p) for p in self.outbound):
            return None
        sent = dumps(call.args)
        parts = set(_strings(call.args))
        sent_values = values(call.args)

        def flows(strings: set[str], found: set[str]) -> bool:
            if (found & sent_values) - self.trusted:
                return True  # a value of the untrusted data, not also the person's
            # a tainted string inside the arguments, or an argument cut from one
            return any(s in sent and not self._own(s) for s in strings) or any(
                p in s and not self._own(p) for p in parts for s in strings
            )

        sources = tuple(seq for seq, strings, found in self.tainted if flows(strings, found))
        if sources:
            return Violation(
                self.name,
                self.verdict,
                f"{call.tool} would send data that came from a secret-bearing or untrusted "
                f"result (event {', '.join(map(str, sources))}) without an approval",
                sources,
            )
        return None


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        for part in value.replace("[secret:", "\n").split("\n"):
            if len(part.strip()) >= MIN_FLOW_CHARS:
                yield part.strip()
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


class Drift(Rule):
    """Judges each ``session_profiled`` event against the baseline it carries."""

    name = "drift"
    kinds = frozenset({Kind.SESSION_PROFILED})

    def __init__(
        self,
        baseline_sessions: int = 3,
        min_steps: int = 5,
        demote_to: str | None = None,
        tool_mix: float = DEFAULT_THRESHOLDS["tool_mix"],
        error_rate: float = DEFAULT_THRESHOLDS["error_rate"],
        refusal_rate: float = DEFAULT_THRESHOLDS["refusal_rate"],
        tokens_per_step: float = DEFAULT_THRESHOLDS["tokens_per_step"],
    ) -> None:
        self.baseline_sessions, self.min_steps, self.demote_to = (
            baseline_sessions, min_steps, demote_to,
        )  # fmt: skip
        levels = ("observe", "advise", "act_with_approval", "act_autonomously")
        if demote_to is not None and demote_to not in levels:
            raise TypeError(f"demote_to must be one of {', '.join(levels)}")
        self.thresholds = {
            "tool_mix": tool_mix,
            "error_rate": error_rate,
            "refusal_rate": refusal_rate,
            "tokens_per_step": tokens_per_step,
        }

    def observe(self, ev: Event) -> Violation | None:
        if ev.kind != Kind.SESSION_PROFILED or not ev.data.get("compared"):
            return None
        beyond = drifted(ev.data["profile"], ev.data["baseline"], self.thresholds)
        if not beyond:
            return None
        what = ", ".join(f"{k} {v:g} > {self.thresholds[k]:g}" for k, v in sorted(beyond.items()))
        return Violation(
            self.name,
            "warn",
            f"this session's behaviour drifted from the baseline: {what}",
            (ev.seq,),
        )


class Probing(Rule):
    name = "probing"
    kinds = frozenset({Kind.TOOL_RESULT, Kind.GOVERNANCE_REFUSED})

    def __init__(self, refusals: int = 10, window: float = 600.0) -> None:
        self.refusals, self.window = refusals, window
        self.seen: deque[tuple[float, int]] = deque()

    def observe(self, ev: Event) -> Violation | None:
        refused = ev.kind == Kind.GOVERNANCE_REFUSED or (
            ev.kind == Kind.TOOL_RESULT and ev.data.get("refused")
        )
        if not refused:
            return None
        self.seen.append((ev.at, ev.seq))
        while self.seen and self.seen[0][0] <= ev.at - self.window:
            self.seen.popleft()
        if len(self.seen) >= self.refusals:
            seqs = tuple(seq for _, seq in self.seen)
            self.seen.clear()
            return Violation(
                self.name,
                "suspend",
                f"{len(seqs)} refused calls within {self.window:g} s: the agent is probing "
                "its limits",
                seqs,
            )
        return None


class Sequence(Rule):
    def __init__(self, first: str, then: str, within: float, verdict: str) -> None:
        self.name = f"sequence {first} -> {then}"
        self.first, self.then, self.within, self.verdict = first, then, within, verdict
        self.last_first: tuple[float, int] | None = None

    def observe(self, ev: Event) -> Violation | None:
        if _ran(ev, self.first):
            self.last_first = (ev.at, ev.seq)
        return None

    def check(self, call: Call) -> Violation | None:
        if self.last_first is None or not fnmatch.fnmatchcase(call.tool, self.then):
            return None
        at, seq = self.last_first
        if call.at - at <= self.within:
            return Violation(
                self.name,
                self.verdict,
                f"{call.tool} within {self.within:g} s of {self.first} (event {seq})",
                (seq,),
            )
        return None


class Count(Rule):
    def __init__(self, pattern: str, most: int, window: float, verdict: str) -> None:
        self.name = f"count {pattern}"
        self.pattern, self.most, self.window, self.verdict = pattern, most, window, verdict
        self.seen: deque[tuple[float, int]] = deque()

    def observe(self, ev: Event) -> Violation | None:
        if _ran(ev, self.pattern):
            self.seen.append((ev.at, ev.seq))
        return None

    def check(self, call: Call) -> Violation | None:
        if not fnmatch.fnmatchcase(call.tool, self.pattern):
            return None
        while self.seen and self.seen[0][0] <= call.at - self.window:
            self.seen.popleft()
        if len(self.seen) >= self.most:
            return Violation(
                self.name,
                self.verdict,
                f"{call.tool} would be call {len(self.seen) + 1} matching {self.pattern} "
                f"within {self.window:g} s (at most {self.most})",
                tuple(s for _, s in self.seen),
            )
        return None


class PythonRule(Rule):
    def __init__(self, ref: str, func: Callable[..., Any]) -> None:
        self.name = f"python {ref}"
        self.func = func

    def _answer(self, answer: Any, seqs: tuple[int, ...]) -> Violation | None:
        if not answer:
            return None
        verdict, message = answer
        if verdict not in VERDICTS:
            return Violation(self.name, "warn", f"answered an unknown verdict {verdict!r}", seqs)
        return Violation(self.name, verdict, str(message), seqs)

    def observe(self, ev: Event) -> Violation | None:
        return self._answer(self.func(ev, None), (ev.seq,))

    def check(self, call: Call) -> Violation | None:
        return self._answer(self.func(None, call), ())


class MonitorSet:
    """The rules one agent runs under; fed in journal order."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = list(rules)
        wanted: set[str] = set()
        for r in self.rules:
            if r.kinds is None:
                wanted = set()
                break
            wanted |= r.kinds
        self._kinds = frozenset(wanted) if wanted or not self.rules else None

    def observe(self, ev: Event) -> list[Violation]:
        if ev.kind in (Kind.VIOLATION, Kind.VIOLATION_CLEARED):
            return []  # the monitors' own records are outputs, not inputs
        if self._kinds is not None and ev.kind not in self._kinds:
            return []
        return [v for r in self.rules if (v := r.observe(ev)) is not None]

    def needs_start(self) -> bool:
        """Whether a rule counts from the agent's creation (so it must be told when)."""
        return any(isinstance(r, Budget) for r in self.rules)

    def drift(self) -> Drift | None:
        return next((r for r in self.rules if isinstance(r, Drift)), None)

    def start(self, created_at: float) -> None:
        """Tell rules that count from the agent's creation when that was."""
        for r in self.rules:
            if isinstance(r, Budget):
                r.started = created_at

    def check_call(self, call: Call) -> list[Violation]:
        return [v for r in self.rules if (v := r.check(call)) is not None]

    def dataflow(self) -> DataFlow | None:
        return next((r for r in self.rules if isinstance(r, DataFlow)), None)

    def resume(
        self,
        failed: list[int],
        failed_in_row: int,
        tainted: Iterable[Event],
        trusted: Iterable[str] = (),
    ) -> None:
        """Give rules what the journal holds beyond the events they were primed with.

        ``failed_in_row`` is the state's count of failed calls since the last
        success and ``failed`` the latest of them; ``tainted`` are the results
        the state names as tainted. With
        them, a restarted activation's rules answer as a replay of the whole
        journal does (``stead check``).
        """
        for r in self.rules:
            if isinstance(r, ErrorStreak):
                r.failed, r.streak = failed_in_row, list(failed)[-min(r.errors, STREAK_SHOWN) :]
            elif isinstance(r, DataFlow):
                r.resume(tainted, trusted)


def proposed_call(ev: Event) -> Call | None:
    """The call a stored event shows the monitors were asked about, if any.

    The runtime marks every call it asked them about with ``verdict.monitored``
    (the time it asked), on the call's intent, or on its result when it has
    no intent (read-only, or blocked).
    """
    if ev.kind not in (Kind.TOOL_INTENT, Kind.TOOL_RESULT):
        return None
    d = ev.data
    verdict = d.get("verdict")
    if not isinstance(verdict, Mapping) or "monitored" not in verdict:
        return None
    # checked as if approved: before a person was asked, for what no approval lifts
    approved = bool(verdict.get("approval") or verdict.get("as_if_approved"))
    return Call(d["call_id"], d["tool"], d.get("args") or {}, float(verdict["monitored"]), approved)


def replay(events: Iterable[Event], monitors: MonitorSet) -> list[tuple[int, Violation]]:
    """Run monitors over a stored journal: (the seq it was found at, violation) in order."""
    found: list[tuple[int, Violation]] = []
    for ev in events:
        call = proposed_call(ev)
        if call is not None:
            found += [(ev.seq, v) for v in monitors.check_call(call)]
        found += [(ev.seq, v) for v in monitors.observe(ev)]
    return found
