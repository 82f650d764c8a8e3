"""The JSON schemas of the API's bodies and answers (OpenAPI 3.1 speaks JSON Schema).

Request bodies are strict (no property the endpoint does not take), so a
misspelt field is an error rather than ignored; answers list what they always
hold and allow more, so a field added later breaks no client.

What comes in a path, a query or a header is read here too: a number is ASCII
digits (:func:`whole`), never ``²`` (which ``str.isdigit`` takes, and ``int``
refuses) or ``٣`` (which ``int`` reads as 3); an id in a path has no control
character (:func:`odd_path_part`), so a NUL never reaches a store (PostgreSQL
cannot hold one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError

OBJECT: dict[str, Any] = {"type": "object"}
ID: dict[str, Any] = {"type": "string", "minLength": 1}
NUMBER: dict[str, Any] = {"type": "number"}
TEXT: dict[str, Any] = {"type": "string"}


def strict(
    properties: dict[str, Any],
    required: list[str] | None = None,
    one_of: list[list[str]] | None = None,
) -> dict[str, Any]:
    """An object with exactly these properties (``one_of``: exactly one of these sets)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    if one_of:
        schema["oneOf"] = [{"required": names} for names in one_of]
    return schema


def answer(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An answer's object: these properties, always ``required`` (default: all)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }


def listing(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


AGENT = answer(
    {"agent_id": ID, "tenant": ID, "name": TEXT, "status": TEXT,
     "version": {"type": "integer"}, "updated_at": NUMBER}
)  # fmt: skip
NEW_AGENT = answer({"agent_id": ID, "status": TEXT, "version": {"type": "integer"}})
AGENT_STATE = answer(
    {"agent_id": ID, "tenant": ID, "name": TEXT, "created_at": NUMBER, "status": TEXT,
     "state": OBJECT}
)  # fmt: skip
EVENT = answer(
    {"agent_id": ID, "seq": {"type": "integer"}, "kind": TEXT, "at": NUMBER, "data": OBJECT,
     "prev_hash": TEXT, "hash": TEXT, "epoch": {"type": "integer"}},
    required=["seq", "kind", "at", "data", "hash"],
)  # fmt: skip
EVENT_PAGE = answer(
    {"events": listing(EVENT), "next": {"type": ["integer", "null"]}},
)
APPROVAL = answer(
    {"agent_id": ID, "approval_id": ID, "tool": TEXT, "args": OBJECT, "reason": TEXT,
     "agent": OBJECT, "why": TEXT, "origins": OBJECT, "change": {"type": ["string", "null"]},
     "asked_at": NUMBER, "waited": NUMBER, "valid": OBJECT},
    required=["agent_id"],
)  # fmt: skip
AUDIT = answer(
    {"agent_id": ID, "ok": {"type": "boolean"}, "events": {"type": "integer"},
     "head_hash": {"type": ["string", "null"]}, "bad_event": {"type": ["integer", "null"]},
     "reason": TEXT, "anchored": {"type": "boolean"}, "anchor": TEXT,
     "drift": {"type": "array"}, "spec": TEXT},
    required=["agent_id", "ok", "events"],
)  # fmt: skip


_DIGITS = re.compile(r"[0-9]{1,19}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def whole(text: str, what: str, low: int = 0, high: int = 2**62) -> int:
    """``text`` as a whole number from ``low`` to ``high``, in ASCII digits only."""
    if not _DIGITS.fullmatch(text) or not low <= int(text) <= high:
        raise UsageError(f"{what} is a whole number from {low} to {high}, not {text!r}")
    return int(text)


def odd_path_part(params: Mapping[str, Any]) -> str | None:
    """Why one of a route's path parameters cannot name anything, or None."""
    for name, value in params.items():
        if isinstance(value, str) and _CONTROL.search(value):
            return f"{name} {value!r} has a control character; no {name} has one"
    return None
