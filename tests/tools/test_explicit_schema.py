"""A tool declared with an explicit JSON schema: offered as given, checked in full."""

from __future__ import annotations

from typing import Any

import pytest

from stead import tool
from stead.errors import ToolError
from stead.models.actions import ToolCall, ToolSpec, actions_from_calls
from stead.tools.base import as_tool

SCHEMA = {
    "type": "object",
    "properties": {
        "currency": {"enum": ["EUR", "USD"]},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "to": {
            "type": "object",
            "properties": {"iban": {"type": "string", "pattern": "^[A-Z]{2}"}},
        },
    },
    "required": ["currency", "amount"],
    "additionalProperties": False,
}


@tool(effect="effectful", schema=SCHEMA)
def pay(**args: Any) -> str:
    """Pay someone."""
    return f"paid {args['amount']} {args['currency']}"


def test_the_declared_schema_is_the_tools_schema_and_is_enforced_at_the_call() -> None:
    t = as_tool(pay)
    assert t.schema["properties"]["currency"] == {"enum": ["EUR", "USD"]}
    assert t.schema["required"] == ["currency", "amount"]
    assert t.call({"currency": "EUR", "amount": 5}, None) == "paid 5 EUR"  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="currency: 'GBP' is not one of"):
        t.call({"currency": "GBP", "amount": 5}, None)  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="to/iban: 'x' does not match"):
        t.call({"currency": "EUR", "amount": 1, "to": {"iban": "x"}}, None)  # type: ignore[arg-type]


def test_a_models_call_is_checked_against_the_declared_schema_before_it_runs() -> None:
    t = as_tool(pay)
    offered = [ToolSpec(t.name, t.description, t.schema)]
    ok = actions_from_calls([ToolCall("c", "pay", '{"currency": "USD", "amount": 2}')], offered)
    assert ok == [{"type": "tool", "tool": "pay", "args": {"currency": "USD", "amount": 2}}]
    from stead.errors import InvalidAnswer

    with pytest.raises(InvalidAnswer, match="at amount: 0 is less than or equal"):
        actions_from_calls([ToolCall("c", "pay", '{"currency": "USD", "amount": 0}')], offered)


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "array"}, "must be a JSON object schema"),
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "not a valid JSON schema"),
    ],
)
def test_a_bad_schema_is_refused_at_declaration(schema: Any, problem: str) -> None:
    with pytest.raises(ToolError, match=problem):

        @tool(schema=schema)
        def broken() -> None:
            pass


def test_a_declared_schema_is_checked_as_json_schema_says_not_as_a_signature_would() -> None:
    """No ``required`` list and no ``additionalProperties``: every argument is optional,
    and ones it does not name are allowed (an MCP server's schema is often so)."""
    loose = {"type": "object", "properties": {"amount": {"type": "integer"}}}

    @tool(effect="effectful", schema=loose)
    def transfer(**args: Any) -> str:
        """Move money."""
        return f"moved {sorted(args)}"

    t = as_tool(transfer)
    assert t.call({}, None) == "moved []"  # type: ignore[arg-type]
    assert t.call({"amount": 5, "memo": "rent"}, None) == "moved ['amount', 'memo']"  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="amount"):
        t.call({"amount": "five"}, None)  # type: ignore[arg-type]
