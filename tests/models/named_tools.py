"""Tools whose names a provider's model cannot be offered (for the spec checks)."""

from __future__ import annotations

from stead import tool


@tool(effect="read_only", name="finish")
def my_finish() -> str:
    """A tool that takes the name of one of the runtime's own actions."""
    return "finished?"


@tool(effect="read_only", name="look up")
def look_up() -> str:
    """A tool whose name has a space in it."""
    return "found"
