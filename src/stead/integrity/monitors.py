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
from typing import TYPE_CHECKING, Any, cast

from ..canonical import dumps, sha256_hex
from ..journal import Event, Kind
from ..state import STREAK_SHOWN
from .drift import DEFAULT_THRESHOLDS, drifted

if TYPE_CHECKING:
    from .dataflow import DataFlow

VERDICTS = ("warn", "ask", "block", "suspend")
DEMOTE_LEVELS = ("observe", "advise", "act_with_approval", "act_autonomously")
"""The autonomy levels drift's ``demote_to`` may name (the spec's, which this package
does not import)."""
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
        if demote_to is not None and demote_to not in DEMOTE_LEVELS:
            raise TypeError(f"demote_to must be one of {', '.join(DEMOTE_LEVELS)}")
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
        found = next((r for r in self.rules if r.name == "dataflow"), None)
        return cast("DataFlow | None", found)

    def resume(
        self,
        failed: list[int],
        failed_in_row: int,
        tainted: Iterable[Event],
        trusted: Iterable[str] = (),
        allowed: Mapping[str, Mapping[str, Any]] | None = None,
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
            elif r.name == "dataflow":
                cast("DataFlow", r).resume(tainted, trusted, allowed)


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
