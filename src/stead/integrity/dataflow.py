"""The data-flow rule: what came from untrusted data must not go out unasked.

See :class:`DataFlow`. It is one of the rules of :mod:`stead.integrity.monitors`
(the others are counted there); it lives here since it alone follows data.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ..canonical import dumps
from ..journal import Event, Kind
from ..state import TAINTED_KEPT
from ..values import texts, values
from .allowances import Allowances
from .identifiers import named, tokens
from .monitors import MIN_FLOW_CHARS, Call, Rule, Violation
from .pointing import Record, pointed, records, words_of
from .quarantine import steers as answer_steers
from .withhold import withhold


class Entry(NamedTuple):
    """A result that must not flow out."""

    seq: int
    strings: set[str]
    """Its lines long enough to trace."""
    values: set[str]
    tokens: set[str]
    """Its whole tokens, for arguments that name something, however short (empty
    when no tool has such an argument)."""
    steers: bool = True
    """Whether the model read it: a result hidden as handles, or a quarantined
    query's constrained answer, cannot steer the model's choices."""
    tool: str = ""
    """The tool whose result it is (a query's answer: the queried result's)."""


class DataFlow(Rule):
    """Text or values from a secret-bearing or untrusted result in an outbound call.

    What the person gave is trusted: values in the agent's instructions and
    goals (``trusted``), in a person's messages and in the arguments of calls a
    person approved. A value found both there and in untrusted data is the
    person's, so it flows freely; anything else from untrusted data does not,
    unless a person approves the call (``verdict`` ``ask``, or ``block``).

    ``untrusted`` names tools (or fnmatch patterns) whose results are
    third-party text, whole, or one field of them (``read_mail.body``: the
    values under ``body`` keys, wherever they are in the result). ``influence``
    also covers what copies nothing: an outbound call decided while an
    untrusted result was in the model's view, with an argument holding a value
    no person gave (the agent may have been steered into choosing it).

    ``changing`` names tools whose calls change the world without sending
    anything out (delete, cancel, remove a member, change a setting): their
    arguments are checked for copies only, an argument whose values, or whose
    named tokens, came from an untrusted result that no person gave.
    """

    name = "dataflow"
    kinds = frozenset({Kind.TOOL_RESULT, Kind.INPUT_RECEIVED, Kind.APPROVAL_REQUESTED,
                       Kind.APPROVAL_GRANTED, Kind.DECISION, Kind.CONTEXT_COMPACTED,
                       Kind.QUERY_ANSWERED, Kind.FLOW_ALLOWED, Kind.TOOL_INTENT,
                       Kind.AGENT_CREATED})  # fmt: skip

    def __init__(
        self,
        untrusted: Iterable[str] = (),
        outbound: Iterable[str] = (),
        verdict: str = "ask",
        trusted: Iterable[str] = (),
        trusted_tools: Iterable[str] = (),
        trusted_text: Iterable[str] = (),
        influence: str | None = None,
        answer: str = "withhold",
        naming: Mapping[str, Iterable[str]] | None = None,
        fetching: Mapping[str, Iterable[str]] | None = None,
        hide: Iterable[str] = (),
        changing: Iterable[str] = (),
    ) -> None:
        # tool patterns whose results are third-party text: None for the whole
        # result, else the names of the fields that are
        self.untrusted: dict[str, set[str] | None] = {}
        for entry in sorted(set(untrusted)):
            pattern, _, key = entry.partition(".")
            if not key or self.untrusted.get(pattern, set()) is None:
                self.untrusted[pattern] = None
            else:
                self.untrusted[pattern] = {*(self.untrusted.get(pattern) or set()), key}
        self.outbound = list(outbound)
        # tools whose calls change the world in place (delete, cancel, a setting):
        # nothing leaves, but what they act on must not be an untrusted result's choice
        self.changing = list(changing)
        self.verdict = verdict
        self.influence = influence
        self.answer = answer
        self.trusted = set(trusted)
        # what a person wrote, whole (lowercased): a piece of it is theirs too
        self.trusted_text: list[str] = [t.lower() for t in trusted_text]
        # each tool's arguments that name something (stead.integrity.identifiers): a
        # token an untrusted result holds counts there, however short
        self.naming = {tool: frozenset(args) for tool, args in (naming or {}).items()}
        # read-only tools that reach an address (fetch_url): outbound for those arguments
        self.fetching = {tool: frozenset(args) for tool, args in (fetching or {}).items()}
        self._person_tokens: set[str] = set().union(*(tokens(t) for t in self.trusted_text))
        # names or patterns of tools whose results are system data, though untrusted
        # also matches them ("everything is untrusted but these")
        self.trusted_tools = sorted(set(trusted_tools))
        # tools whose untrusted results the model is shown as handles (stead.integrity.handles)
        self.hide = sorted(set(hide))
        self.tainted: list[Entry] = []
        # how values are read, and whether an approval makes them the person's
        # (stead.values.VERSION; the agent's, set from its state or its creation)
        self.version = 1
        # the records of the system's own results (stead.integrity.pointing), by seq
        self.system: list[tuple[int, list[Record]]] = []
        self._pointed: tuple[Any, set[str]] = (None, set())  # pointed(), made once per change
        # the flows the user's task asks for (allow_flow: stead.integrity.allowances)
        self.allowances = Allowances()
        self._asked: dict[str, set[str]] = {}  # approval id -> its call's values
        self._in_view: set[int] = set()  # the results the latest decision's context showed
        self._through = 0  # the latest compaction folded the events up to here

    def fields_of(self, tool: str) -> set[str] | None:
        """Which of ``tool``'s results are untrusted: all (None), or the fields named
        (none: an empty set)."""
        if self.is_system(tool):
            return set()
        if tool in self.untrusted:  # named outright: more precise than any pattern
            keys = self.untrusted[tool]
            return None if keys is None else set(keys)
        found: set[str] = set()
        for pattern, keys in self.untrusted.items():
            if fnmatch.fnmatchcase(tool, pattern):
                if keys is None:
                    return None
                found |= keys
        return found

    def hides_failures(self, tool: str, data: Mapping[str, Any]) -> bool:
        """Whether a failed result's error is hidden from the model: a hidden tool's,
        or a call's a handle was put into (an error can quote what the call read)."""
        if data.get("ok"):
            return False
        return bool(data.get("handles")) or any(fnmatch.fnmatchcase(tool, p) for p in self.hide)

    def hidden_fields(self, tool: str, data: Mapping[str, Any]) -> tuple[bool, set[str] | None]:
        """Whether a result (its event data, before it is journaled) is to be hidden
        from the model, and what of it: the whole (None) or its untrusted fields. A
        result of a call a handle was put into is hidden whole, whatever the tool: it
        may echo the hidden text (a word count, a translation)."""
        if not data.get("ok"):
            return False, set()
        if data.get("handles"):
            return True, None
        if not any(fnmatch.fnmatchcase(tool, p) for p in self.hide):
            return False, set()
        keys = self.fields_of(tool)
        if keys is None or "[secret:" in dumps(data.get("output")):
            return True, None
        return bool(keys), keys

    def _untrusted_part(self, data: Mapping[str, Any]) -> Any:
        """What of a result (its event data) must not flow out, or None."""
        if not data.get("ok"):
            return None
        output = data.get("output")
        if data.get("handles"):
            return output  # what a call made of hidden text is that text's
        keys = self.fields_of(str(data["tool"]))
        if "[secret:" in dumps(output):
            return output  # a secret-bearing result, whatever its fields
        if keys is None:
            return output
        return list(_under(output, keys)) if keys else None

    def is_system(self, tool: str) -> bool:
        """Whether ``tool``'s results are system data (it says so, or the spec does)."""
        return any(fnmatch.fnmatchcase(tool, p) for p in self.trusted_tools)

    def system_records(self, data: Mapping[str, Any]) -> list[Record]:
        """The records of a trusted tool's result (one that declares its results
        system data, or that the spec names ``trusted``): none for any other, nor for
        a failed or secret-bearing one. The system fields of a result with untrusted
        ones are not records: a third party may write them too (a sender's name)."""
        tool = str(data["tool"])
        if not data.get("ok") or not self.is_system(tool):
            return []
        output = data.get("output")
        if "[secret:" in dumps(output):
            return []
        return records(output, set(), self.version)

    def taints(self, data: Mapping[str, Any]) -> bool:
        """Whether a tool result (its event data) holds text that must not flow out.

        Only a result with some text long enough to trace counts: one that
        holds none is not remembered, so it never pushes out one that does.
        """
        part = self._untrusted_part(data)
        return part is not None and (any(True for _ in _strings(part)) or bool(self._values(part)))

    def _entry(self, ev: Event) -> Entry:
        if ev.kind == Kind.QUERY_ANSWERED:
            # a constrained answer about hidden text: its values keep the text's origin
            part, steers = ev.data.get("answer"), answer_steers(ev.data.get("schema") or {})
            source = ev.data.get("source")
            tool = next((e.tool for e in self.tainted if e.seq == source), "")
        else:
            part, steers = self._untrusted_part(ev.data), "hidden" not in ev.data
            tool = str(ev.data.get("tool", ""))
        words = (
            set().union(*(tokens(t) for t in texts(part, numbers=True))) if self.naming else set()
        )
        return Entry(ev.seq, set(_strings(part)), self._values(part), words, steers, tool)

    def _tainting(self, ev: Event) -> bool:
        if ev.kind == Kind.QUERY_ANSWERED:
            return bool(ev.data.get("ok"))
        return ev.kind == Kind.TOOL_RESULT and self.taints(ev.data)

    def observe(self, ev: Event) -> Violation | None:
        d = ev.data
        calls = (Kind.TOOL_INTENT, Kind.TOOL_RESULT)
        used = (d.get("provenance") or {}).get("allowed_by") if ev.kind in calls else None
        if used:
            self.allowances.use(str(used))  # as the state counts it (state._use_allowance)
        if ev.kind == Kind.TOOL_RESULT and d.get("system"):
            held = self.system_records(d)
            if held:
                self.system = [*self.system, (ev.seq, held)][-TAINTED_KEPT:]
        if self._tainting(ev):
            self.tainted = [*self.tainted, self._entry(ev)][-TAINTED_KEPT:]
        elif ev.kind == Kind.DECISION:
            self._in_view = {int(s) for s in d.get("context_events") or []}
        elif ev.kind == Kind.CONTEXT_COMPACTED:
            self._through = int(d.get("through") or 0)
        elif ev.kind == Kind.FLOW_ALLOWED and d.get("ok"):
            self.allowances.add(d["allowance"])
        elif ev.kind == Kind.INPUT_RECEIVED:
            self.trusted |= self._values(d.get("text"))
            self.trusted_text.append(str(d.get("text") or "").lower())
            self._person_tokens |= tokens(self.trusted_text[-1])
        elif ev.kind == Kind.APPROVAL_REQUESTED:
            self._asked[str(d.get("approval_id"))] = self._values(d.get("args"))
        elif ev.kind == Kind.APPROVAL_GRANTED:
            approved = self._asked.pop(str(d.get("approval_id")), set())
            if self.version < 2:  # since version 2 an approval authorises that call alone
                self.trusted |= approved
        elif ev.kind == Kind.AGENT_CREATED:  # a replay from the start (stead check)
            self.version = int(d.get("provenance", 1))
            self.trusted |= self._values(self.trusted_text)
        return None

    def resume(
        self,
        earlier: Iterable[Event],
        trusted: Iterable[str] = (),
        allowed: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Take back tainted results older than the events this rule was primed with,
        the values people gave before then, and the flows allowed with their uses
        (as the state keeps them)."""
        if allowed is not None:
            self.allowances.load(allowed)
        earlier = list(earlier)
        seen = {entry.seq for entry in self.tainted}
        older = [self._entry(ev) for ev in earlier if ev.seq not in seen and self._tainting(ev)]
        self.tainted = [*older, *self.tainted][-TAINTED_KEPT:]
        known = {seq for seq, _ in self.system}
        system = [
            (ev.seq, held)
            for ev in earlier
            if ev.seq not in known and ev.data.get("system")
            if (held := self.system_records(ev.data))
        ]
        self.system = sorted([*system, *self.system])[-TAINTED_KEPT:]
        self.trusted |= set(trusted)

    def compacted(self, through: int) -> None:
        """The journal is folded into a summary up to ``through`` (at least)."""
        self._through = max(self._through, through)

    def influenced(self) -> tuple[int, ...]:
        """The untrusted results in the model's view when it made the latest decision:
        those its context showed, and any newer than the latest compaction (a
        conversation shows every turn since)."""
        return tuple(
            entry.seq
            for entry in self.tainted
            if entry.steers and (entry.seq in self._in_view or entry.seq > self._through)
        )

    def _values(self, value: Any) -> set[str]:
        return values(value, self.version)

    def pointed(self) -> set[str]:
        """The values of the system's records a person pointed at: theirs, whatever
        untrusted text also holds them or was in view (:mod:`.pointing`)."""
        key = (len(self.trusted_text), tuple(seq for seq, _ in self.system))
        if self._pointed[0] != key:
            words = words_of(self.trusted_text)
            found = set().union(*(pointed(held, words) for _, held in self.system))
            self._pointed = (key, found)
        return self._pointed[1]

    def _own(self, text: str) -> bool:
        """Whether ``text`` is what a person gave: all its values are trusted, or a
        person wrote it word for word."""
        found = self._values(text)
        if found and found <= self.trusted:
            return True
        lowered = text.strip().lower()
        return any(lowered in written for written in self.trusted_text)

    def _from(self, value: Any) -> list[int]:
        """The tainted results whose values or text ``value`` holds (and no person gave)."""
        text = dumps(value)
        parts, found = set(_strings(value)), self._values(value)
        own = found & (self.trusted | self.pointed())
        return [
            seq
            for seq, strings, tainted, *_ in self.tainted
            if (tainted & found) - own
            or any(s in text and not self._own(s) for s in strings)
            or any(p in s and not self._own(p) for p in parts for s in strings)
        ]

    def _named_from(self, tool: str, name: str, value: Any) -> list[int]:
        """The tainted results holding, as a whole token, what an argument that names
        something names (and no person gave)."""
        if name not in self.naming.get(tool, ()):
            return []
        wanted = {t for t in named(value) if t not in self.trusted and t not in self._person_tokens}
        return [entry.seq for entry in self.tainted if wanted & entry.tokens] if wanted else []

    def _flows(self, tool: str, name: str, value: Any) -> list[int]:
        return sorted({*self._from(value), *self._named_from(tool, str(name), value)})

    def _fed(self, tool: str, args: Mapping[str, Any]) -> tuple[dict[str, list[int]], str | None]:
        """The arguments untrusted results fed (with those results), and the allowance
        that lets all of them into this call, if one does."""
        fed = {str(n): seqs for n, v in args.items() if (seqs := self._flows(tool, str(n), v))}
        if not fed or not self.allowances.held:
            return fed, None
        by_seq = {e.seq: e.tool for e in self.tainted}
        tools = {name: {by_seq.get(s, "") for s in seqs} for name, seqs in fed.items()}
        return fed, self.allowances.covering(tool, tools)

    def sources(self, tool: str, args: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Where each argument's values came from: ``untrusted`` (the results named in
        ``from``, and the allowance that lets them in, if one does), ``trusted`` (all
        of them a person gave), or ``model`` (neither)."""
        out: dict[str, dict[str, Any]] = {}
        fed, allowed = self._fed(tool, args)
        for name, value in args.items():
            seqs, found = fed.get(str(name)), self._values(value)
            if seqs:
                out[str(name)] = {"source": "untrusted", "from": seqs}
                if allowed is not None:
                    out[str(name)]["allowed_by"] = allowed
            elif found and found <= self.trusted:
                out[str(name)] = {"source": "trusted"}
            else:
                out[str(name)] = {"source": "model"}
        return out

    def check(self, call: Call) -> Violation | None:
        if call.approved:
            return None
        if any(fnmatch.fnmatchcase(call.tool, p) for p in self.outbound):
            args, does = call.args, "send"
        elif call.tool in self.fetching:  # a read that fetches an address sends it there
            args = {k: v for k, v in call.args.items() if k in self.fetching[call.tool]}
            does = "fetch"
        elif any(fnmatch.fnmatchcase(call.tool, p) for p in self.changing):
            args, does = call.args, "act on"
        else:
            return None
        fed, allowed = self._fed(call.tool, args)
        if fed and allowed is None:
            sources = sorted(set().union(*fed.values()))
            return Violation(
                self.name,
                self.verdict,
                f"{call.tool} would {does} data that came from a secret-bearing or untrusted "
                f"result (event {', '.join(map(str, sources))}) without an approval",
                tuple(sources),
            )
        seen = self.influenced()
        # influence is for what leaves: a changing call's danger is the target it
        # names (the message, the booking, the member), which the copy check above
        # follows; asking of every delete made with mail in view would ask always
        if self.influence is None or not seen or does == "act on":
            return None
        # what an allowance let in is the person's delegation; the rest may be steered
        chosen = sorted(
            str(name) for name, value in args.items() if name not in fed and _chosen(value, self)
        )
        if chosen:
            return Violation(
                self.name,
                self.influence,
                f"{call.tool} was decided while untrusted text (event "
                f"{', '.join(map(str, seen))}) was in the model's view, and its "
                f"{', '.join(chosen)} hold{'s' if len(chosen) == 1 else ''} values no person "
                "gave: the text may have steered the choice",
                seen,
            )
        return None

    def answer_sources(self, text: str) -> dict[str, Any]:
        """Where an answer to a person (a finish summary, a question) came from:
        ``untrusted`` with the results it repeats, else ``model``."""
        seqs = self._from(text)
        return {"source": "untrusted", "from": seqs} if seqs else {"source": "model"}

    def withheld(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        """``text`` with the values it repeats from untrusted results, that no person
        gave, withheld (:mod:`.withhold`), and what was."""
        untrusted: dict[str, int] = {}
        for entry in self.tainted:  # oldest first: a value's latest source is named
            untrusted |= dict.fromkeys(entry.values, entry.seq)
        return withhold(text, untrusted, self.trusted | self.pointed(), self.version)


def _chosen(value: Any, rule: DataFlow) -> bool:
    """Whether ``value`` holds a value no person gave that someone chose: an address,
    a link, an identifier, a number (not prose, which the model writes itself); a
    value from a record of the system's data a person pointed at is theirs."""
    return any(" " not in v for v in rule._values(value) - rule.trusted - rule.pointed())


def _under(value: Any, keys: set[str]) -> Iterable[Any]:
    """The values under any of ``keys``, at any depth of JSON data."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            if k in keys:
                yield v
            else:
                yield from _under(v, keys)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _under(v, keys)


def _strings(value: Any) -> Iterable[str]:
    """The lines of ``value`` long enough to trace, cut at each redacted secret."""
    for text in texts(value):
        for part in text.replace("[secret:", "\n").split("\n"):
            if len(part.strip()) >= MIN_FLOW_CHARS:
                yield part.strip()
