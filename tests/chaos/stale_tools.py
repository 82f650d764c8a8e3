"""A tool for tests/chaos/test_stale_writes.py: its first call stalls like a stopped process."""

from __future__ import annotations

import threading
from typing import Any

from stead.tools import ToolContext, tool
from stead.tools.builtin import write_file

entered = threading.Event()
wake = threading.Event()
calls: list[str] = []


@tool(effect="idempotent")
def note(text: str, ctx: ToolContext) -> dict[str, Any]:
    """Write note.txt; the first call waits for ``wake`` first."""
    calls.append(ctx.call_id)
    if len(calls) == 1:
        entered.set()
        wake.wait(30)
    return write_file("note.txt", text, ctx)
