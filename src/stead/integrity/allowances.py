"""Flows the user's task asks for: values from the source a person named, into the
calls the person named.

"Pay the bill in this file", "open the link in Bob's message", "invite the people
in this list": the user's task names the untrusted source the values may come
from, and what they are for. The agent says so with the ``allow_flow`` action
(``from`` a tool whose results are the source, ``to`` the tool, optionally
which of its ``args``, for ``uses`` calls: 1 unless it says more, at most
:data:`MAX_USES`). It is accepted only while no untrusted text is in the model's
view: the model then has read only what people wrote, so the flow it declares
is its reading of the person's task, not of a third party's text. It is
journaled (``flow_allowed``, with ``ok`` and, if refused, why).

A call whose untrusted values all come from results of an allowed source, into
the allowed tool and arguments, with uses left, goes out unasked; its
provenance names the allowance (``allowed_by``) and it uses one. Values from
any other untrusted result still ask.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import InvalidAnswer
from ..ids import new_id
from ..journal import Kind

if TYPE_CHECKING:
    from ..ports import AgentPort
    from .dataflow import DataFlow

MAX_USES = 20


@dataclass(frozen=True, slots=True)
class Allowance:
    """One flow a task asks for, and how many of its uses are spent."""

    id: str
    source: str
    """The tool whose results the values may come from."""
    target: str
    """The tool they may go into."""
    args: tuple[str, ...] | None
    """Which of its arguments (None: any)."""
    uses: int
    used: int = 0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["args"] = None if self.args is None else list(self.args)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Allowance:
        args = data.get("args")
        return cls(
            str(data["id"]),
            str(data["source"]),
            str(data["target"]),
            None if args is None else tuple(str(a) for a in args),
            int(data["uses"]),
            int(data.get("used", 0)),
        )


def parse(action: Mapping[str, Any], tools: Mapping[str, Any]) -> dict[str, Any]:
    """The allowance an ``allow_flow`` action asks for, checked against the agent's
    tools (without its id); :class:`~stead.errors.InvalidAnswer` says what is wrong."""
    source, target = action.get("from"), action.get("to")
    for what, name in (("from", source), ("to", target)):
        if not isinstance(name, str) or name not in tools:
            raise InvalidAnswer(
                f"allow_flow: {what} must name one of your tools "
                f"({', '.join(sorted(tools)) or 'none'}), got {name!r}"
            )
    args = action.get("args")
    if args is not None and (
        not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args)
    ):
        raise InvalidAnswer("allow_flow: args must list the names of the arguments")
    uses = action.get("uses", 1)
    if isinstance(uses, bool) or not isinstance(uses, int) or not 1 <= uses <= MAX_USES:
        raise InvalidAnswer(f"allow_flow: uses must be a whole number from 1 to {MAX_USES}")
    return {"source": source, "target": target, "args": args, "uses": uses}


class Allowances:
    """The allowances an agent holds, by id."""

    def __init__(self) -> None:
        self.held: dict[str, Allowance] = {}

    def add(self, data: Mapping[str, Any]) -> None:
        a = Allowance.from_json(data)
        self.held = {**self.held, a.id: a}

    def use(self, allowance_id: str) -> None:
        a = self.held.get(allowance_id)
        if a is not None:
            self.held = {**self.held, a.id: replace(a, used=a.used + 1)}

    def load(self, held: Mapping[str, Mapping[str, Any]]) -> None:
        """Take the allowances the state keeps (a restarted activation)."""
        self.held = {k: Allowance.from_json(v) for k, v in held.items()}

    def covering(self, tool: str, fed: Mapping[str, set[str]]) -> str | None:
        """The allowance that lets every argument in ``fed`` (its name, and the tools
        whose results fed it) into a call of ``tool``, or None."""
        if not fed:
            return None
        for a in self.held.values():
            if a.target != tool or a.used >= a.uses:
                continue
            if a.args is not None and not set(fed) <= set(a.args):
                continue
            if all(sources == {a.source} for sources in fed.values()):
                return a.id
        return None


def allow_flow(
    act: AgentPort, rule: DataFlow | None, index: int, action: Mapping[str, Any]
) -> None:
    """Journal the allowance ``rule`` (the agent's data-flow rule) is to hold, or why
    it is refused (the model reads either)."""
    asked = {k: action[k] for k in ("from", "to", "args", "uses", "reason") if k in action}
    try:
        if rule is None:
            raise InvalidAnswer("allow_flow: no data-flow rule watches this agent; nothing asks")
        allowance = parse(action, act.tools)
        seen = rule.influenced()
        if seen:
            raise InvalidAnswer(
                f"allow_flow: untrusted text (event {', '.join(map(str, seen))}) is in your "
                "view, so the flow may be its wish, not the person's; declare the flows the "
                "person's task names before reading untrusted text, or let a person approve "
                "each call"
            )
    except InvalidAnswer as exc:
        act.emit(Kind.FLOW_ALLOWED, action=index, asked=asked, ok=False, error=str(exc))
        return
    allowance = {"id": new_id("flow", act.clock, act.rng), **allowance, "used": 0}
    act.emit(Kind.FLOW_ALLOWED, action=index, asked=asked, ok=True, allowance=allowance)
