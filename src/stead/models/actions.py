"""The agent's choices as tools a model calls: its own tools and the runtime's actions.

A provider's model decides by calling tools. Besides the agent's tools it is
offered the runtime's own actions (:data:`ACTION_TOOLS`: remember, push or
complete a goal, finish, wait for input or for a time, message or delegate to
another agent), each with a JSON schema. One answer with several tool calls is
one decision with several actions, in the order the model gave them.

:func:`decision_from_calls` turns the calls into the runtime's actions, and
refuses (:class:`~stead.errors.InvalidAnswer`) an answer with nothing in it, a call
of a tool the agent does not have, or arguments that are not JSON or do not
fit the tool's schema: that answer is journaled and shown to the model with
the reason, never run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..canonical import strict_loads
from ..errors import InvalidAnswer, ModelError, ScriptError, SpecError
from .base import RenderedContext, parse_action

_TEXT = {"type": "string"}
ACTION_TOOLS: dict[str, dict[str, Any]] = {
    "remember": {
        "description": "Store facts in your durable memory (merged into what you remember).",
        "parameters": {
            "type": "object",
            "properties": {"values": {"type": "object", "minProperties": 1}},
            "required": ["values"],
            "additionalProperties": False,
        },
    },
    "push_goal": {
        "description": "Add a goal (a sub-task) to your goal stack.",
        "parameters": {
            "type": "object",
            "properties": {"id": _TEXT, "description": _TEXT},
            "required": ["id"],
            "additionalProperties": False,
        },
    },
    "complete_goal": {
        "description": "Claim a goal done; its acceptance checks are run before it counts.",
        "parameters": {
            "type": "object",
            "properties": {"id": _TEXT},
            "required": ["id"],
            "additionalProperties": False,
        },
    },
    "finish": {
        "description": "Claim the whole task done, with a summary; checked before it counts.",
        "parameters": {
            "type": "object",
            "properties": {"summary": _TEXT},
            "required": ["summary"],
            "additionalProperties": False,
        },
    },
    "wait_for_input": {
        "description": "Stop and ask a person; you continue when they answer.",
        "parameters": {
            "type": "object",
            "properties": {"prompt": _TEXT},
            "required": ["prompt"],
            "additionalProperties": False,
        },
    },
    "wait": {
        "description": "Sleep durably for some seconds (or until an epoch time), then go on.",
        "parameters": {
            "type": "object",
            "properties": {
                "seconds": {"type": "number", "exclusiveMinimum": 0},
                "until": {"type": "number"},
                "reason": _TEXT,
            },
            "additionalProperties": False,
        },
    },
    "send_message": {
        "description": "Send a signed message to another agent of your tenant.",
        "parameters": {
            "type": "object",
            "properties": {
                "to": _TEXT,
                "text": _TEXT,
                "kind": {"enum": ["message", "result"]},
            },
            "required": ["to", "text"],
            "additionalProperties": False,
        },
    },
    "delegate": {
        "description": "Hand another agent part of one of your delegable grants.",
        "parameters": {
            "type": "object",
            "properties": {"to": _TEXT, "grant": _TEXT, "narrow": {"type": "object"}},
            "required": ["to", "grant"],
            "additionalProperties": False,
        },
    },
    "read_result": {
        "description": "Read on in a tool result that was cut: the call and offset its note gives.",
        "parameters": {
            "type": "object",
            "properties": {"call": _TEXT, "offset": {"type": "integer", "minimum": 0}},
            "required": ["call", "offset"],
            "additionalProperties": False,
        },
    },
    "allow_flow": {
        "description": "Before you read any untrusted text, declare a flow the person's "
        "task asks for: values read by the tool `from` (the source the person named: 'the "
        "bill in this file', 'the link in Bob's mail') may go into the tool `to` (its `args`, "
        "or all), for `uses` calls (default 1). Values from any other untrusted source still "
        "wait for a person.",
        "parameters": {
            "type": "object",
            "properties": {
                "from": _TEXT,
                "to": _TEXT,
                "args": {"type": "array", "items": _TEXT, "minItems": 1},
                "uses": {"type": "integer", "minimum": 1, "maximum": 20},
                "reason": _TEXT,
            },
            "required": ["from", "to"],
            "additionalProperties": False,
        },
    },
    "query": {
        "description": "Ask a question about untrusted text hidden from you as a handle "
        "($hN): a reader that sees only that text answers in the form your JSON Schema "
        "allows (a boolean, a number, an enum, a date, an address, a link, or a list of them).",
        "parameters": {
            "type": "object",
            "properties": {"handle": _TEXT, "question": _TEXT, "schema": {"type": "object"}},
            "required": ["handle", "question", "schema"],
            "additionalProperties": False,
        },
    },
}
"""The runtime's own actions, offered to a model as tools (no agent tool may share a name);
``query`` only to an agent whose spec hides results (:mod:`stead.integrity.handles`)."""

_SHORT = {"send_message": "message"}
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""A tool name every provider accepts."""


def check_tool_names(names: Iterable[str]) -> None:
    """Refuse tool names a provider's model cannot be offered (SpecError, at creation)."""
    for name in sorted(names):
        if name in ACTION_TOOLS:
            raise SpecError(
                f"tool {name!r} has the name of one of the runtime's own actions "
                f"({', '.join(ACTION_TOOLS)}); declare it under another name"
            )
        if not TOOL_NAME.match(name):
            raise SpecError(
                f"tool {name!r} cannot be offered to a provider's model: a tool name is 1 to "
                "64 letters, digits, '_' or '-'; declare it under such a name"
            )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as a model is offered it: a name, what it does, its argument schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call in a model's answer, as the provider sent it."""

    call_id: str
    name: str
    arguments: str
    """The arguments as the JSON text the model wrote (checked here, not trusted)."""


def offered_tools(context: RenderedContext) -> list[ToolSpec]:
    """The agent's tools then the runtime's actions, in a fixed order."""
    try:  # refused at creation from a spec; a program may still hand over such a tool
        check_tool_names(str(t["name"]) for t in context.tools)
    except SpecError as exc:
        raise ModelError(f"the model cannot be offered the agent's tools: {exc}") from None
    own = [
        ToolSpec(str(t["name"]), str(t.get("description") or ""), t.get("parameters") or {})
        for t in context.tools
    ]
    return own + [
        ToolSpec(name, a["description"], a["parameters"])
        for name, a in ACTION_TOOLS.items()
        if name != "query" or context.hiding
    ]


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        args = strict_loads(call.arguments or "{}")
    except (ValueError, RecursionError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc) or "nested too deep"
        raise InvalidAnswer(
            f"the arguments of your call of {call.name} are not valid JSON ({why[:200]})"
        ) from None
    if not isinstance(args, dict):
        raise InvalidAnswer(f"the arguments of your call of {call.name} must be a JSON object")
    return args


def _check(call: ToolCall, args: Mapping[str, Any], schema: Mapping[str, Any]) -> None:
    try:
        validator = Draft202012Validator(schema)
        error = next(iter(sorted(validator.iter_errors(args), key=lambda e: e.path)), None)
    except SchemaError:
        return  # a tool's own schema that is not valid is the tool's to answer for
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the arguments"
        raise InvalidAnswer(
            f"the arguments of your call of {call.name} do not fit its schema at {where}: "
            f"{error.message}"
        )


NO_TOOL = (
    "your answer called no tool; every answer must call at least one tool "
    "(finish when the task is done, wait_for_input to ask a person)"
)


def actions_from_calls(
    calls: Sequence[ToolCall], offered: Sequence[ToolSpec], text: str = ""
) -> list[dict[str, Any]]:
    """The runtime's actions for a model's tool calls, in order, or InvalidAnswer.

    An answer of ``text`` and no call is the agent saying something
    (``{"type": "say"}``); what that is, the spec's ``on_text`` says
    (:mod:`stead.models.speech`)."""
    if not calls:
        if text.strip():
            return [{"type": "say", "text": text}]
        raise InvalidAnswer("your answer had neither text nor a tool call; " + NO_TOOL)
    by_name = {t.name: t for t in offered}
    actions = []
    for call in calls:
        spec = by_name.get(call.name)
        if spec is None:
            raise InvalidAnswer(
                f"there is no tool {call.name!r}; the tools are {', '.join(sorted(by_name))}"
            )
        args = _arguments(call)
        _check(call, args, spec.parameters)
        if call.name not in ACTION_TOOLS:
            actions.append({"type": "tool", "tool": call.name, "args": args})
            continue
        short = _SHORT.get(call.name, call.name)
        value: Any = args
        if short == "remember":
            value = args["values"]
        elif short in ("complete_goal",):
            value = args["id"]
        elif short == "finish":
            value = args["summary"]
        elif short == "wait_for_input":
            value = args["prompt"]
        try:
            actions.append(parse_action({short: value}, f"your call of {call.name}"))
        except ScriptError as exc:
            raise InvalidAnswer(str(exc)) from None
    return actions
