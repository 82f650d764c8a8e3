"""The JSON schemas of the API's bodies and answers (OpenAPI 3.1 speaks JSON Schema).

Request bodies are strict (no property the endpoint does not take), so a
misspelt field is an error rather than ignored; answers list what they always
hold and allow more, so a field added later breaks no client.
"""

from __future__ import annotations

from typing import Any

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
    {"agent_id": ID, "tenant": ID, "name": TEXT, "created_at": NUMBER, "state": OBJECT}
)
EVENT = answer(
    {"agent_id": ID, "seq": {"type": "integer"}, "kind": TEXT, "at": NUMBER, "data": OBJECT,
     "prev_hash": TEXT, "hash": TEXT, "epoch": {"type": "integer"}},
    required=["seq", "kind", "at", "data", "hash"],
)  # fmt: skip
EVENT_PAGE = answer(
    {"events": listing(EVENT), "next": {"type": ["integer", "null"]}},
)
APPROVAL = answer({"agent_id": ID, "approval_id": ID, "tool": TEXT}, required=["agent_id"])
AUDIT = answer(
    {"agent_id": ID, "ok": {"type": "boolean"}, "events": {"type": "integer"},
     "head_hash": {"type": ["string", "null"]}, "bad_event": {"type": ["integer", "null"]},
     "reason": TEXT, "anchored": {"type": "boolean"}, "anchor": TEXT,
     "drift": {"type": "array"}, "spec": TEXT},
    required=["agent_id", "ok", "events"],
)  # fmt: skip
