"""An MCP server that looks around its sandbox, for ``stead selftest isolation``.

Run as ``python probe_server.py``. Its one tool, ``look``, tries to read each
path it is given (a file's first bytes, a folder's names) and says what it
saw or why it could not; and it reports its own environment. It needs only the
MCP SDK (not stead), since it runs inside an agent's sandbox, where stead's
own code is not importable.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

LOOK = types.Tool(
    name="look",
    description="Read each path (a file's start, a folder's names); report the environment.",
    input_schema={
        "type": "object",
        "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
        "required": ["paths"],
    },
    annotations=types.ToolAnnotations(read_only_hint=True),
)


def look(path: str) -> str:
    try:
        if os.path.isdir(path):
            return f"{path}: folder of {sorted(os.listdir(path))[:50]}"
        with open(path, "rb") as fh:
            return f"{path}: read {fh.read(4096)!r}"
    except OSError as exc:
        return f"{path}: unreadable ({exc.strerror})"


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[LOOK])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    paths = (params.arguments or {}).get("paths") or []
    lines = [look(str(p)) for p in paths]
    lines.append(f"environment: {sorted(os.environ.items())}")
    return types.CallToolResult(content=[types.TextContent(type="text", text="\n".join(lines))])


SERVER: Server[Any] = Server("probe", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve() -> None:
    async with stdio_server() as (read, write):
        await SERVER.run(read, write, SERVER.create_initialization_options())


if __name__ == "__main__":
    if sys.argv[1:]:
        raise SystemExit("probe_server.py takes no arguments")
    anyio.run(_serve)
