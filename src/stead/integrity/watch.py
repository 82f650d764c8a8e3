"""The activation's monitors: fed every event, asked before every call, journaled.

A :class:`Watch` is made per activation from the spec's ``monitors:`` section
(:mod:`stead.integrity.monitors`) and primed with the agent's most recent
events, so rules that look back (a loop, an error streak, refusals in a
window) continue across restarts. Whatever a rule finds is journaled as a
``violation`` event naming the events involved; ``suspend`` stops the agent in
``needs_attention`` until a person clears it, ``block`` refuses the call about
to run, ``warn`` only records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import SpecError
from ..governance.gate import LEVELS, Verdict, effective_level, granted_approval
from ..ids import new_id
from ..integrity import drift, identifiers
from ..integrity.handles import hide
from ..integrity.monitor_config import MonitorConfigError, build_monitors
from ..integrity.monitors import Call, MonitorSet, Violation
from ..journal import Event, Kind
from ..tools.base import Effect, Tool
from ..tools.builtin import BUILTINS
from ..tools.registry import import_object
from ..values import values

if TYPE_CHECKING:
    from ..ports import AgentPort

PRIME_EVENTS = 64
"""How many of the latest events a new activation's monitors are primed with."""


def monitors_for(
    spec: Mapping[str, Any], tools: Mapping[str, Tool], *, strict: bool = False, version: int = 1
) -> MonitorSet:
    """The spec's monitors; a broken section is a SpecError naming the field.

    ``version`` is the agent's provenance version (:data:`stead.values.VERSION`):
    how the data-flow rule reads values, and what an approval means.

    The tools that hold secrets are where the data-flow rule looks for leaks.
    ``strict`` (when an agent is made) also refuses a data-flow name or pattern
    that matches none of ``tools``.
    """
    base = str(spec.get("base_dir", "."))
    goals = [g for g in spec.get("goals") or [] if isinstance(g, Mapping)]
    written = [spec.get("instructions"), *(g.get("description") for g in goals)]
    try:
        built = build_monitors(
            spec.get("monitors"),
            secret_tools=[name for name, t in tools.items() if t.secrets],
            untrusted_tools=[
                name if t.untrusted is True else f"{name}.{key}"
                for name, t in tools.items()
                for key in ((None,) if t.untrusted is True else t.untrusted or ())
            ],
            trusted_tools=[name for name, t in tools.items() if t.trusted],
            naming=identifiers.of_tools(tools.items(), identifiers.naming_args),
            # a read that fetches an address sends it there
            fetching=identifiers.of_tools(
                [(n, t) for n, t in tools.items() if t.effect is Effect.READ_ONLY],
                identifiers.address_args,
            ),
            # a tool that names its untrusted fields is read by them, not whole
            read_tools=[
                n for n, t in tools.items() if t.effect is Effect.READ_ONLY and t.untrusted is False
            ],
            acting_tools=[
                n for n, t in tools.items() if t.effect is Effect.EFFECTFUL and n != "shell"
            ],
            # what changes the world in place; the runtime's own workspace tools
            # (write_file, shell) act on the agent's workspace, snapshotted and
            # rolled back, and shell reaches out only under a person's grant
            changing_tools=[
                n
                for n, t in tools.items()
                if t.effect is not Effect.READ_ONLY and BUILTINS.get(n) is not t.func
            ],
            load=lambda ref: import_object(ref, [base], "monitor"),
            tool_names=[*tools, *_mcp_named(spec)] if strict else None,
            trusted=values(written, version),
            trusted_text=[t for t in written if isinstance(t, str)],
        )
    except MonitorConfigError as exc:
        raise SpecError(f"spec field {exc}") from None
    rule = built.dataflow()
    if rule is not None:
        rule.version = version
    return built


def _mcp_named(spec: Mapping[str, Any]) -> list[str]:
    """The data-flow section's names of MCP tools: not listed until the agent is made,
    so taken as they are (``git__*``) if they name a server the spec lists."""
    prefixes = tuple(f"{s['name']}__" for s in spec.get("mcp") or [])
    flow = (spec.get("monitors") or {}).get("dataflow") or {}
    named = [e for key in ("outbound", "untrusted", "trusted") for e in flow.get(key) or []]
    return [e.partition(".")[0] for e in named if isinstance(e, str) and prefixes
            and e.startswith(prefixes)]  # fmt: skip


class Watch:
    """One activation's monitors and what they found."""

    def __init__(self, act: AgentPort) -> None:
        self.act = act
        self.monitors = monitors_for(act.record.spec, act.tools, version=act.state.provenance)
        self._recording = False
        self.session = drift.empty()  # this activation's behaviour, for drift
        self.session["sessions"] = 1
        self._ended = False

    def prime(self) -> None:
        """Feed the latest events, as the previous activations saw them; report nothing."""
        version = self.act.state.version
        agent = self.act.record.agent_id
        if self.monitors.needs_start():
            created = next(iter(self.act.store.read_events(agent, 1, 1)))
            self.monitors.start(created.at)
        start = max(1, version - PRIME_EVENTS + 1)
        for ev in self.act.store.read_events(agent, start, version):
            self.monitors.observe(ev)
        # what rules remember from further back, as the state names it
        state = self.act.state
        older = (
            []
            if self.monitors.dataflow() is None
            else [
                ev
                for seq in sorted({*state.tainted, *state.system_results})
                if seq < start
                for ev in self.act.store.read_events(agent, seq, seq)
            ]
        )
        self.monitors.resume(
            state.failed_last, state.failed_in_row, older, state.trusted_values,
            state.flows_allowed,
        )  # fmt: skip
        rule = self.monitors.dataflow()
        if rule is not None:  # the latest compaction, perhaps older than the primed events
            rule.compacted(int((state.compaction or {}).get("through", 0)))

    def taint_of(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """What a call's arguments owe to untrusted data, for the gate and the journal:
        each argument's source, the untrusted ones, and whether the decision was
        made while an untrusted result was in the model's view (``influenced``)."""
        rule = self.monitors.dataflow()
        if rule is None:
            return {"args": {}, "untrusted_args": [], "influenced": False}
        sources = rule.sources(tool, args)
        influenced = bool(rule.influenced())
        untrusted = sorted(n for n, s in sources.items() if s["source"] == "untrusted")
        taint = {"args": sources, "untrusted_args": untrusted, "influenced": influenced}
        allowed = {s["allowed_by"] for s in sources.values() if "allowed_by" in s}
        return taint | ({"allowed_by": allowed.pop()} if allowed else {})

    def said(self, text: str) -> dict[str, Any]:
        """Where words to a person came from (see :meth:`DataFlow.answer_sources`)."""
        rule = self.monitors.dataflow()
        return {} if rule is None else rule.answer_sources(text)

    def told(self, text: str) -> tuple[str, dict[str, Any]]:
        """Words to a person (a question), as they are to be shown, and what to
        journal with them: where they came from, if they repeat untrusted text, and
        what of it was withheld (``answer: withhold``)."""
        seen = self.said(text)
        if seen.get("source") != "untrusted":
            return text, {}
        shown, seen = self._withheld(text, seen)
        return shown, {"provenance": seen}

    def _withheld(self, text: str, seen: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """``text`` with what it repeats from untrusted results withheld, where the
        spec wants that, and its provenance listing what was."""
        rule = self.monitors.dataflow()
        if rule is None or rule.answer != "withhold" or seen.get("source") != "untrusted":
            return text, seen
        shown, withheld = rule.withheld(text)
        return shown, ({**seen, "withheld": withheld} if withheld else seen)

    def answer(
        self, index: int, action: Mapping[str, Any], version: int
    ) -> tuple[str, dict[str, Any], tuple[dict[str, Any], Verdict] | None]:
        """A finish summary as it is to be delivered (under ``answer: withhold``, the
        values it repeats from untrusted results replaced by placeholders), where
        it came from, and, when it repeats untrusted text and the spec wants a
        person to see such an answer first (``answer: ask``) and none has yet, the
        call and verdict to hold it on (a person approves it)."""
        summary = str(action.get("summary", ""))
        rule = self.monitors.dataflow()
        if rule is None:
            return summary, {}, None
        seen = self.said(summary)
        call_id = action.get("call_id")
        if rule.answer != "ask" or not call_id:
            return (*self._withheld(summary, seen), None)
        call = {"action": index, "call_id": call_id, "tool": "finish", "args": {"summary": summary}}
        state, now = self.act.state, self.act.clock.now()
        # looked for first: the values of an approved answer are the person's now
        aid = granted_approval(state, str(call_id), "finish", call["args"], version, now)
        if aid is not None:
            return summary, {**seen, "approval": aid}, None
        if seen["source"] != "untrusted":
            return summary, seen, None
        reason = (
            f"the answer repeats untrusted text (event {', '.join(map(str, seen['from']))}); "
            "the spec asks that a person sees such an answer first"
        )
        verdict = Verdict("ask", reason, effective_level(state, "finish"), version)
        return summary, seen, (call, verdict)

    def hiding(self, tool: str, result: Mapping[str, Any], seq: int) -> dict[str, Any]:
        """What to journal beside a result the model is not to read (the spec's
        ``hide``): which part is hidden, and what the model is shown in its place
        (:func:`stead.integrity.handles.hide`); nothing for any other result."""
        rule = self.monitors.dataflow()
        if rule is None:
            return {}
        if rule.hides_failures(tool, result):
            note = "[the call failed; its error message is untrusted text, hidden from you]"
            return {"hidden": {"fields": None, "error": True}, "shown": note}
        hidden, fields = rule.hidden_fields(tool, {"tool": tool, **result})
        if not hidden:
            return {}
        shown, _ = hide(result.get("output"), fields, seq)
        return {"hidden": {"fields": None if fields is None else sorted(fields)}, "shown": shown}

    def system(self, result: Mapping[str, Any]) -> bool:
        """Whether a tool result is a trusted tool's, whose records a person may point
        at (:mod:`stead.integrity.pointing`): decided by its tool alone, on the call's
        path; the records are read once, when the rule observes the result."""
        rule = self.monitors.dataflow()
        return rule is not None and bool(result.get("ok")) and rule.is_system(str(result["tool"]))

    def taints(self, result: Mapping[str, Any]) -> bool:
        """Whether a tool result is one the data-flow rule must not let flow out."""
        rule = self.monitors.dataflow()
        return rule is not None and rule.taints(result)

    def observe(self, ev: Event) -> None:
        self._profile(ev)
        if self._recording:
            return  # the violation events themselves
        for v in self.monitors.observe(ev):
            self.record(v)

    def check(
        self, call_id: str, tool: str, args: Mapping[str, Any], approved: bool
    ) -> tuple[float, list[Violation]]:
        """Ask the rules about a call; record what they find; return when and what."""
        now = self.act.clock.now()
        found = self.monitors.check_call(Call(call_id, tool, args, now, approved))
        for v in found:
            self.record(v, call_id)
        return now, found

    def _profile(self, ev: Event) -> None:
        p, d = self.session, ev.data
        if ev.kind == Kind.DECISION:
            p["steps"] += 1
            p["tokens"] += float((d.get("usage") or {}).get("tokens", 0))
        elif ev.kind == Kind.TOOL_RESULT and d.get("refused"):
            p["refusals"] += 1
        elif ev.kind == Kind.TOOL_RESULT:
            p["calls"] = {**p["calls"], d["tool"]: p["calls"].get(d["tool"], 0) + 1}
            p["errors"] += 0 if d.get("ok") else 1
        elif ev.kind == Kind.GOVERNANCE_REFUSED:
            p["refusals"] += 1

    def end_session(self) -> None:
        """Journal this session's profile against the baseline; demote on drift if asked.

        Called once, as the activation's step loop ends; its events are committed
        with the loop's last flush.
        """
        if self._ended:
            return
        self._ended = True
        rule = self.monitors.drift()
        if rule is None or self.session["steps"] < rule.min_steps:
            return  # too short a session to say anything about behaviour
        state = self.act.state
        baseline = state.baseline or drift.empty()
        compared = baseline["sessions"] >= rule.baseline_sessions
        after = baseline if compared else drift.merge(baseline, self.session)
        before = len(self.act.buffer)
        self.act.emit(
            Kind.SESSION_PROFILED,
            profile=self.session,
            baseline=baseline,
            compared=compared,
            baseline_after=after,
            shifts=drift.shifts(self.session, baseline) if compared else {},
        )
        drifted = any(
            e.kind == Kind.VIOLATION and e.data["rule"] == "drift" for e in self.act.buffer[before:]
        )
        level, target = state.autonomy, rule.demote_to
        if drifted and target is not None and LEVELS.index(target) < LEVELS.index(level):
            self.act.emit(
                Kind.AUTONOMY_CHANGED,
                level=target,
                tool=None,
                by="the drift monitor (configured by the operator)",
                reason=f"behaviour drifted from the baseline; was {level}",
            )

    def record(self, v: Violation, call_id: str | None = None) -> None:
        self._recording = True
        try:
            self.act.emit(
                Kind.VIOLATION,
                violation_id=new_id("vio", self.act.clock, self.act.rng),
                call_id=call_id,
                **v.to_json(),
            )
        finally:
            self._recording = False
