"""Models: stateless functions from a rendered context to a decision.

A model sees nothing but a :class:`RenderedContext` and answers with a
:class:`Decision`, a list of actions. It holds no state between calls, which is
what lets a live agent switch models, and lets a crashed step reuse its
journaled decision instead of asking again.

Actions are plain JSON objects, as they are stored in the journal:

* ``{"type": "tool", "tool": NAME, "args": {...}}``
* ``{"type": "remember", "values": {...}}``
* ``{"type": "push_goal", "id": ID, "description": TEXT}``
* ``{"type": "complete_goal", "id": ID}``
* ``{"type": "finish", "summary": TEXT}``
* ``{"type": "wait_for_input", "prompt": TEXT}``
* ``{"type": "say", "text": TEXT}``: an answer of text and no tool call, made a
  wait for the person's reply, a finish or a refusal by the spec's ``on_text``
  (:mod:`stead.models.speech`) before it is journaled;
* ``{"type": "wait", "seconds": N}`` or ``{"type": "wait", "until": EPOCH_SECONDS}``,
  with an optional ``"reason"``: a durable timer; the agent waits (and may be
  hibernated) until it fires, once, on whichever worker is up by then;
* ``{"type": "message", "to": AGENT, "text": TEXT, "kind": "message" | "result"}``:
  a signed message to another agent of the same tenant;
* ``{"type": "delegate", "to": AGENT, "grant": GRANT, "narrow": {...}}``: hand
  another agent part of a delegable grant (only ever narrower); ``GRANT`` is a
  grant id or the tool (pattern) of one of the agent's delegable grants;
* ``{"type": "grant" | "approve" | "set_autonomy", "request": ...}``: an agent
  asking to widen its own authority. These are accepted as decisions so that
  they can be refused and recorded; only a person can grant, approve or raise
  autonomy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ScriptError
from .conversation import Turn

ESCALATIONS = ("grant", "approve", "set_autonomy")
"""Action types an agent may emit but that are always refused: self-escalation."""
ACTION_TYPES = (
    "tool",
    "remember",
    "push_goal",
    "complete_goal",
    "finish",
    "wait_for_input",
    "say",
    "wait",
    "message",
    "delegate",
    "read_result",
    "query",
    "allow_flow",
    *ESCALATIONS,
)


@dataclass(frozen=True, slots=True)
class RenderedContext:
    """Everything a model is shown for one step, rendered deterministically.

    ``text`` is the one-document form (the scripted model's, and a custom
    model's); a model that asks for the conversation (``conversation = True``)
    gets ``system`` and ``messages`` instead (:mod:`stead.models.conversation`),
    and ``text`` is then empty.
    """

    text: str
    hash: str
    step: int
    tools: Sequence[Mapping[str, Any]]
    system: str = ""
    messages: tuple[Turn, ...] = ()
    size: int = 0
    """The characters of the canonical JSON the hash was taken over (a size estimate)."""
    hiding: bool = False
    """Some results are hidden from the model as handles: it is offered ``query``."""
    final: int = 0
    """How many of ``messages`` are sent unchanged at every later step of ``lineage``:
    a wire format may keep their encoding from one step to the next."""
    lineage: object | None = None
    """The conversation the messages belong to; a new one after each compaction."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What a model decided: one or more actions, in order."""

    actions: tuple[Mapping[str, Any], ...]
    # what the model reports it cost, if it does: {"tokens": N, "spend": AMOUNT}, and
    # for a provider's model the tokens in, out and cached
    usage: Mapping[str, float] | None = None
    # each HTTP request the decision took (status, latency, error), for the journal
    attempts: tuple[Mapping[str, Any], ...] = ()
    text: str = ""
    """What the model wrote beside its calls: its own words on why (shown to a person
    deciding on an approval; never acted on)."""

    def to_json(self) -> list[dict[str, Any]]:
        return [dict(a) for a in self.actions]


class Model(Protocol):
    """The model seam. Implementations must not keep state between calls."""

    name: str

    def decide(self, context: RenderedContext) -> Decision:
        """Return the decision for ``context``, or raise ModelError."""
        ...


def parse_action(item: Any, where: str) -> dict[str, Any]:
    """One action from its short YAML form (``{tool: x, args: {...}}`` etc.)."""
    if not isinstance(item, Mapping):
        raise ScriptError(
            f"{where}: an action must be a mapping such as "
            "{tool: NAME, args: {...}} or {finish: TEXT}, got "
            f"{type(item).__name__}"
        )
    if "type" in item:
        item = _short_form(item, where)
    keys = set(item)
    if "tool" in keys:
        extra = keys - {"tool", "args"}
        if extra:
            raise ScriptError(
                f"{where}: a tool action takes 'tool' and 'args', not "
                f"{', '.join(sorted(map(str, extra)))}"
            )
        args = item.get("args") or {}
        if not isinstance(item["tool"], str) or not isinstance(args, Mapping):
            raise ScriptError(f"{where}: 'tool' must be a name and 'args' a mapping")
        return {"type": "tool", "tool": item["tool"], "args": dict(args)}
    if len(keys) != 1:
        raise ScriptError(
            f"{where}: expected exactly one of {', '.join(ACTION_TYPES)}; "
            f"got {', '.join(sorted(map(str, keys))) or 'nothing'}"
        )
    (key,) = keys
    value = item[key]
    if key == "remember":
        if not isinstance(value, Mapping) or not value:
            raise ScriptError(f"{where}: 'remember' takes a non-empty mapping of keys to values")
        return {"type": "remember", "values": {str(k): v for k, v in value.items()}}
    if key == "push_goal":
        if isinstance(value, str):
            value = {"id": value}
        if not isinstance(value, Mapping) or not isinstance(value.get("id"), str):
            raise ScriptError(f"{where}: 'push_goal' takes an id or {{id, description}}")
        return {
            "type": "push_goal",
            "id": value["id"],
            "description": str(value.get("description", "")),
        }
    if key == "complete_goal":
        if not isinstance(value, str):
            raise ScriptError(f"{where}: 'complete_goal' takes a goal id")
        return {"type": "complete_goal", "id": value}
    if key == "finish":
        return {"type": "finish", "summary": "" if value is None else str(value)}
    if key == "wait_for_input":
        return {"type": "wait_for_input", "prompt": "" if value is None else str(value)}
    if key == "say":
        return {"type": "say", "text": "" if value is None else str(value)}
    if key == "wait":
        return _wait(value, where)
    if key in ESCALATIONS:
        return {"type": key, "request": value}
    if key == "read_result":
        offset = value.get("offset", 0) if isinstance(value, Mapping) else None
        if (
            not isinstance(value, Mapping)
            or not isinstance(value.get("call"), str)
            or isinstance(offset, bool)
            or not isinstance(offset, int)
            or offset < 0
        ):
            raise ScriptError(f"{where}: 'read_result' takes {{call: CALL_ID, offset: CHARACTERS}}")
        return {"type": "read_result", "call": value["call"], "offset": offset}
    if key == "query":
        if (
            not isinstance(value, Mapping)
            or not isinstance(value.get("handle"), str)
            or not isinstance(value.get("schema"), Mapping)
        ):
            raise ScriptError(
                f"{where}: 'query' takes {{handle: $hN, question: TEXT, schema: JSON_SCHEMA}}"
            )
        return {
            "type": "query",
            "handle": value["handle"],
            "question": str(value.get("question", "")),
            "schema": dict(value["schema"]),
        }
    if key == "allow_flow":
        if not isinstance(value, Mapping):
            raise ScriptError(
                f"{where}: 'allow_flow' takes {{from: TOOL, to: TOOL, args: [NAME...], "
                "uses: N, reason: TEXT}"
            )
        kept = {k: value[k] for k in ("from", "to", "args", "uses", "reason") if k in value}
        return {"type": "allow_flow", **kept}
    if key == "message":
        if not isinstance(value, Mapping) or not isinstance(value.get("to"), str):
            raise ScriptError(f"{where}: 'message' takes {{to: AGENT_ID, text: TEXT}}")
        kind = value.get("kind", "message")
        if kind not in ("message", "result"):
            raise ScriptError(f"{where}: a message's kind is 'message' or 'result'")
        return {
            "type": "message",
            "to": value["to"],
            "text": str(value.get("text", "")),
            "kind": kind,
        }
    if key == "delegate":
        if (
            not isinstance(value, Mapping)
            or not isinstance(value.get("to"), str)
            or not isinstance(value.get("grant"), str)
        ):
            raise ScriptError(
                f"{where}: 'delegate' takes {{to: AGENT_ID, grant: GRANT_ID, and the narrowed "
                "tool, args, max_uses, valid_for, valid_until, delegable}"
            )
        narrow = {k: v for k, v in value.items() if k not in ("to", "grant")}
        return {"type": "delegate", "to": value["to"], "grant": value["grant"], "narrow": narrow}
    raise ScriptError(
        f"{where}: unknown action {key!r}; actions are "
        f"{', '.join(ACTION_TYPES)} (and 'actions' for several)"
    )


def _wait(value: Any, where: str) -> dict[str, Any]:
    """``wait: SECONDS`` or ``wait: {seconds: N | until: EPOCH_SECONDS, reason: TEXT}``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = {"seconds": value}
    if not isinstance(value, Mapping) or len({"seconds", "until"} & set(value)) != 1:
        raise ScriptError(
            f"{where}: 'wait' takes a number of seconds, or {{seconds: N}} or "
            "{until: EPOCH_SECONDS}, with an optional reason"
        )
    when = "seconds" if "seconds" in value else "until"
    number = value[when]
    if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
        raise ScriptError(f"{where}: 'wait' {when} must be a number of seconds, 0 or more")
    return {"type": "wait", when: number, "reason": str(value.get("reason", ""))}


def _short_form(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The short YAML form of an action given in its stored ``{"type": ...}`` form."""
    kind = item["type"]
    if kind == "tool":
        return {"tool": item.get("tool"), "args": item.get("args") or {}}
    field = {
        "remember": "values",
        "complete_goal": "id",
        "finish": "summary",
        "wait_for_input": "prompt",
        "say": "text",
    }.get(kind)
    if field is not None:
        return {kind: item.get(field)}
    if kind == "push_goal":
        return {kind: {"id": item.get("id"), "description": item.get("description", "")}}
    if kind == "wait":
        return {kind: {k: item[k] for k in ("seconds", "until", "reason") if k in item}}
    if kind in ESCALATIONS:
        return {kind: item.get("request")}
    if kind == "message":
        return {kind: {k: item.get(k) for k in ("to", "text", "kind") if k in item}}
    if kind == "read_result":
        return {kind: {k: item[k] for k in ("call", "offset") if k in item}}
    if kind == "query":
        return {kind: {k: item[k] for k in ("handle", "question", "schema") if k in item}}
    if kind == "allow_flow":
        return {kind: {k: item[k] for k in ("from", "to", "args", "uses", "reason") if k in item}}
    if kind == "delegate":
        narrow = item.get("narrow") or {}
        return {kind: {**narrow, "to": item.get("to"), "grant": item.get("grant")}}
    raise ScriptError(
        f"{where}: unknown action type {kind!r}; action types are {', '.join(ACTION_TYPES)}"
    )


def parse_decision(item: Any, where: str) -> Decision:
    """A decision from YAML: one action, ``tools: [...]``, or ``actions: [...]``; with
    ``actions`` or ``tools``, a ``text`` is what the model wrote beside its calls."""
    text = ""
    if (
        isinstance(item, Mapping)
        and "text" in item
        and set(item) - {"text"} in ({"actions"}, {"tools"})
    ):
        text = str(item["text"] or "")
        item = {k: v for k, v in item.items() if k != "text"}
    if isinstance(item, Mapping) and set(item) == {"actions"}:
        raw = item["actions"]
    elif isinstance(item, Mapping) and set(item) == {"tools"}:
        raw = item["tools"]
    else:
        raw = [item]
    if not isinstance(raw, list) or not raw:
        raise ScriptError(f"{where}: 'actions' and 'tools' take a non-empty list")
    actions = tuple(parse_action(a, f"{where}, action {i + 1}") for i, a in enumerate(raw))
    if "tools" in (item if isinstance(item, Mapping) else {}):
        for i, a in enumerate(actions):
            if a["type"] != "tool":
                raise ScriptError(f"{where}, action {i + 1}: 'tools' lists only tool calls")
    return Decision(actions, text=text)
