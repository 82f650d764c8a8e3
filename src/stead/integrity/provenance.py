"""Provenance: where each call's inputs came from, and what each result went into.

Every decision records which tool results its context showed
(``context_events``: their sequence numbers), and every call records the
decision it came from and which earlier results flowed into its arguments
(``provenance``: ``{"decision": SEQ, "flows_from": [SEQ, ...]}``, on its intent,
or on its result when it has none). A result flows into a call when a line of
its whole output (at least :data:`MIN_FLOW_CHARS` characters) appears in the
call's arguments, or they share a value (:mod:`stead.values`). Where data flow
is watched, the intent also names each argument's source (``args``) and whether
an untrusted result was in view (``influenced``); :meth:`Graph.lineage` names
the arguments an untrusted result fed.

From those edges :func:`lineage` walks back from an event to everything it came
from, and :func:`impact` walks forward from a result to everything downstream
of it: the blast radius of a bad result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..canonical import dumps
from ..journal import Event, Kind
from ..store.base import Store
from ..values import texts, values

MIN_FLOW_CHARS = 8


def pieces(value: Any) -> Iterable[str]:
    """The lines and values of ``value`` long enough to be traced."""
    for text in texts(value):
        for line in text.splitlines() or [text]:
            line = line.strip()
            if len(line) >= MIN_FLOW_CHARS:
                yield line


def journaled_output(store: Store, agent_id: str, seq: int) -> Any:
    """The whole output of the agent's event at ``seq`` (a tool result), or None."""
    for ev in store.read_events(agent_id, seq, seq):
        return ev.data.get("output")
    return None


class FlowTracer:
    """Finds which recent results flow into a call's arguments.

    Made per activation; it remembers each result's text and pieces by its
    sequence number (a result never changes), so a step costs one pass over
    the new call's arguments, not over every recent output again. It reads the
    whole journaled result, never the state's clipped copy: it is fed each
    result as it is emitted (:meth:`observe`), and reads one from before this
    activation from the journal (``load``) the first time it is needed.
    """

    def __init__(self, load: Callable[[int], Any] | None = None) -> None:
        self._seen: dict[int, tuple[str, list[str], set[str]]] = {}
        self._outputs: dict[int, Any] = {}  # whole outputs emitted, not yet looked at
        self._load = load

    def observe(self, ev: Event) -> None:
        """Keep a result's whole output as it is emitted; it is read only when a later
        call is checked against it, so a step that makes no call pays nothing here."""
        if ev.kind == Kind.TOOL_RESULT and ev.data.get("ok"):
            if len(self._outputs) > 200:
                self._outputs.clear()
            self._outputs[ev.seq] = ev.data.get("output")

    def _of(self, call: Mapping[str, Any]) -> tuple[str, list[str], set[str]]:
        seq = int(call["seq"])
        found = self._seen.get(seq)
        if found is None:
            if seq in self._outputs:
                out = self._outputs.pop(seq)
            else:
                out = self._load(seq) if self._load is not None else call.get("output")
            if len(self._seen) > 200:
                self._seen.clear()
            text = out if isinstance(out, str) else dumps(out)
            found = self._seen[seq] = (text, list(pieces(out)), values(out))
        return found

    def flows_from(
        self, args: Mapping[str, Any], recent_calls: Sequence[Mapping[str, Any]]
    ) -> list[int]:
        """The results (by seq) among ``recent_calls`` whose output appears in ``args``."""
        sent = dumps(dict(args))
        sent_pieces = list(pieces(dict(args)))
        sent_values = values(dict(args))
        found = set()
        for call in recent_calls:
            if not call.get("ok") or call.get("seq") is None:
                continue
            text, out_pieces, out_values = self._of(call)
            copied = any(p in sent for p in out_pieces) or any(p in text for p in sent_pieces)
            if copied or sent_values & out_values:  # a line, or a value however rewritten
                found.add(int(call["seq"]))
        return sorted(found)


def flows_from(args: Mapping[str, Any], recent_calls: Sequence[Mapping[str, Any]]) -> list[int]:
    """The results (by seq) among ``recent_calls`` whose output appears in ``args``."""
    return FlowTracer().flows_from(args, recent_calls)


@dataclass(slots=True)
class _Call:
    call_id: str
    tool: str
    decision: int | None = None
    flows: list[int] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)  # its intent and result
    result: int | None = None
    # the arguments each source fed, where the data-flow rule judged them
    args_from: dict[int, list[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Node:
    """One event in a lineage or impact answer."""

    seq: int
    kind: str
    call_id: str | None
    tool: str | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "call_id": self.call_id,
            "tool": self.tool,
            "why": self.why,
        }


class Graph:
    """The provenance edges of one journal."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.events: dict[int, Event] = {}
        self.calls: dict[str, _Call] = {}
        self.by_seq: dict[int, _Call] = {}
        for ev in events:
            self.events[ev.seq] = ev
            if ev.kind not in (Kind.TOOL_INTENT, Kind.TOOL_RESULT):
                continue
            d = ev.data
            call = self.calls.setdefault(d["call_id"], _Call(d["call_id"], d["tool"]))
            call.seqs.append(ev.seq)
            self.by_seq[ev.seq] = call
            prov = d.get("provenance")
            if prov:
                call.decision = prov.get("decision")
                call.flows = list(prov.get("flows_from", []))
                for arg, source in sorted((prov.get("args") or {}).items()):
                    for src in source.get("from", []) if isinstance(source, dict) else []:
                        call.args_from.setdefault(int(src), []).append(str(arg))
                        if src not in call.flows:
                            call.flows.append(int(src))
            if ev.kind == Kind.TOOL_RESULT:
                call.result = ev.seq

    def _node(self, seq: int, why: str) -> Node:
        ev = self.events[seq]
        call = self.by_seq.get(seq)
        return Node(seq, ev.kind, call.call_id if call else None, call.tool if call else None, why)

    def lineage(self, seq: int) -> list[Node]:
        """Everything ``seq`` came from: its call's decision and the results that fed it."""
        self._known(seq)
        out: dict[int, Node] = {}
        todo = [seq]
        while todo:
            call = self.by_seq.get(todo.pop())
            if call is None:
                continue
            if call.decision is not None and call.decision not in out:
                out[call.decision] = self._node(call.decision, f"decided {call.call_id}")
            for src in call.flows:
                if src not in out and src in self.events:
                    fed = call.args_from.get(src)
                    into = f" (untrusted, into {', '.join(fed)})" if fed else ""
                    out[src] = self._node(src, f"its output flowed into {call.call_id}{into}")
                    todo.append(src)
        return [out[s] for s in sorted(out)]

    def impact(self, seq: int) -> list[Node]:
        """Every call downstream of the result at ``seq`` (its output, or theirs, flowed in)."""
        self._known(seq)
        feeds: dict[int, list[_Call]] = {}
        for call in self.calls.values():
            for src in call.flows:
                feeds.setdefault(src, []).append(call)
        out: dict[int, Node] = {}
        todo = [seq]
        while todo:
            for call in feeds.get(todo.pop(), []):
                for s in call.seqs:
                    if s not in out:
                        out[s] = self._node(s, "downstream")
                if call.result is not None and call.result not in todo:
                    todo.append(call.result)
        return [out[s] for s in sorted(out)]

    def _known(self, seq: int) -> None:
        if seq not in self.events:
            raise KeyError(seq)
