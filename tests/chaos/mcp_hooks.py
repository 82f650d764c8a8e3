"""A reconcile hook for the MCP crash test: the bank says the transfer went through."""

from __future__ import annotations

from typing import Any

ASKED: list[dict[str, Any]] = []


def transfer_landed(args: dict[str, Any], ctx: Any) -> str:
    ASKED.append(dict(args))
    return "done"
