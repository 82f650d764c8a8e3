"""An MCP server whose one effectful tool takes a minute: a worker is killed during it.

Run as ``python mcp_slow.py``; it needs only the MCP SDK, so it runs in the
sandbox with the Python environment readable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TRANSFERRING = "transferring"  # the process's name while a transfer is being made (the
# crash test looks for it)

TOOLS = [
    types.Tool(
        name="transfer",
        description="Move money (slowly).",
        input_schema={"type": "object", "properties": {"amount": {"type": "integer"}}},
        annotations=types.ToolAnnotations(read_only_hint=False, idempotent_hint=False),
    )
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    print("transfer started", file=sys.stderr, flush=True)
    # seen from outside the sandbox as the process's name: the crash test kills the
    # worker once the call has reached the server, not a guessed time after it was sent
    Path("/proc/self/comm").write_text(TRANSFERRING)
    time.sleep(60)
    return types.CallToolResult(content=[types.TextContent(type="text", text="moved")])


SERVER: Server[Any] = Server("slow", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve() -> None:
    async with stdio_server() as (read, write):
        await SERVER.run(read, write, SERVER.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_serve)
