"""The data-flow rule: what came from untrusted data must not go out unasked.

See :class:`DataFlow`. It is one of the rules of :mod:`stead.integrity.monitors`
(the others are counted there); it lives here since it alone follows data.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

from ..canonical import dumps
from ..journal import Event, Kind
from ..state import TAINTED_KEPT
from ..values import texts, values
from .monitors import MIN_FLOW_CHARS, Call, Rule, Violation


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
        trusted_tools: Iterable[str] = (),
        trusted_text: Iterable[str] = (),
    ) -> None:
        # tool names or patterns (fnmatch) whose results are third-party text
        self.untrusted = sorted(set(untrusted))
        self.outbound = list(outbound)
        self.verdict = verdict
        self.trusted = set(trusted)
        # what a person wrote, whole (lowercased): a piece of it is theirs too
        self.trusted_text: list[str] = [t.lower() for t in trusted_text]
        # names or patterns of tools whose results are system data, though untrusted
        # also matches them ("everything is untrusted but these")
        self.trusted_tools = sorted(set(trusted_tools))
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
        tool = str(data["tool"])
        untrusted = any(fnmatch.fnmatchcase(tool, p) for p in self.untrusted) and not any(
            fnmatch.fnmatchcase(tool, p) for p in self.trusted_tools
        )
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
            self.trusted_text.append(str(d.get("text") or "").lower())
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
        """Whether ``text`` is what a person gave: all its values are trusted, or a
        person wrote it word for word."""
        found = values(text)
        if found and found <= self.trusted:
            return True
        lowered = text.strip().lower()
        return any(lowered in written for written in self.trusted_text)

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
    """The lines of ``value`` long enough to trace, cut at each redacted secret."""
    for text in texts(value):
        for part in text.replace("[secret:", "\n").split("\n"):
            if len(part.strip()) >= MIN_FLOW_CHARS:
                yield part.strip()
