"""A small MCP server that misbehaves on request, for the MCP client's tests.

Run as ``python -m tests.tools.mcp_servers [MODE]``:

``stdio`` (the default)
    serve on stdin and stdout; each tool is one way to behave or misbehave.
``exit``
    write a line on stderr and exit with code 7 before answering anything.
``http FD``
    serve streamable HTTP on the listening socket inherited as fd ``FD``.

And for the agent-level tests (``tests/attacks/test_mcp_servers.py`` and
``tests/tools/test_mcp_remote.py``), which run it as a script (``python
.../mcp_servers.py MODE``, inside the agent's sandbox):

``agent TAG``
    serve on stdio ``echo``, ``crash``, ``hang``, ``flood``, ``badschema`` and
    ``fail`` (a result marked ``isError``); ``hang``'s grandchild carries
    ``TAG`` on its command line, so a test can look for what is left of it.
``listing FILE``
    serve on stdio ``echo`` and one more tool per word in ``FILE``, read at
    every listing (a server whose tools change).
``http-seen FD FILE``
    as ``http``, and ``whoami`` also appends the header it saw to ``FILE``.

It is written with the SDK's low-level server, which lets a tool answer what
the high-level one would refuse to send (a result off its own schema). It
needs only the SDK, not stead, so it runs in bubblewrap too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

_WIRE = os.dup(1)  # stdout as started: the SDK points fd 1 at stderr while serving
HUGE = 9 * 1024 * 1024
FLOOD = 2 * 1024 * 1024
_PAGE = 3

_OBJECT: dict[str, Any] = {"type": "object"}
TOOLS = [
    types.Tool(
        name="echo",
        description="Say the text back (and on stderr).",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(name="crash", description="Exit with code 3 mid-call.", input_schema=_OBJECT),
    types.Tool(
        name="hang",
        description="Start a grandchild (its pid on stderr), then never answer.",
        input_schema=_OBJECT,
    ),
    types.Tool(name="flood", description="Write garbage lines on stdout.", input_schema=_OBJECT),
    types.Tool(name="huge", description="Answer with 9 MiB of text.", input_schema=_OBJECT),
    types.Tool(
        name="badschema",
        description="Answer off the output schema it declares.",
        input_schema=_OBJECT,
        output_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    ),
    types.Tool(name="whoami", description="The Authorization header seen.", input_schema=_OBJECT),
]


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    """Three tools a page, so the client must follow the cursor."""
    first = int(params.cursor) if params is not None and params.cursor else 0
    rest = first + _PAGE
    cursor = str(rest) if rest < len(TOOLS) else None
    return types.ListToolsResult(tools=TOOLS[first:rest], next_cursor=cursor)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name, args = params.name, params.arguments or {}
    if name == "echo":
        print(f"echo: {args['text']}", file=sys.stderr, flush=True)
        return _text(str(args["text"]))
    if name == "crash":
        print("crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    if name == "hang":
        child = subprocess.Popen(["sleep", "600"])
        print(f"grandchild {child.pid}", file=sys.stderr, flush=True)
        time.sleep(3600)  # blocks the whole server: it answers nothing more
    if name == "flood":
        line = b"this is not JSON-RPC\n"
        for _ in range(FLOOD // len(line) + 1):
            os.write(_WIRE, line)
        return _text("flooded")
    if name == "huge":
        return _text("x" * HUGE)
    if name == "badschema":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="n is not a number")],
            structured_content={"n": "not a number"},
        )
    if name == "whoami":
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", {})
        return _text(str(headers.get("authorization", "")))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="no such tool")], is_error=True
    )


SERVER: Server[Any] = Server("misbehaving", on_list_tools=list_tools, on_call_tool=call_tool)


async def _stdio(server: Server[Any] = SERVER) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


# -- the modes for agent-level tests -------------------------------------------

_AGENT_KEPT = ("echo", "crash", "hang", "flood", "badschema")
AGENT_TOOLS = [
    *(tool for tool in TOOLS if tool.name in _AGENT_KEPT),
    types.Tool(name="fail", description="Answer a result marked isError.", input_schema=_OBJECT),
]
_given: dict[str, str] = {}  # a mode's arguments: tag, listing, seen


async def agent_list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=AGENT_TOOLS)


async def agent_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "fail":
        print("failing on purpose", file=sys.stderr, flush=True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="the disk is on fire")], is_error=True
        )
    if params.name == "hang":
        code = "import time; time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", code, f"grandchild-of-{_given['tag']}"])
        print(f"grandchild {child.pid}", file=sys.stderr, flush=True)
        time.sleep(3600)
    return await call_tool(ctx, params)


def _listed_names() -> list[str]:
    try:
        with open(_given["listing"], encoding="utf-8") as file:
            return file.read().split()
    except OSError:
        return []


async def listing_list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    extra = [
        types.Tool(name=name, description=f"Say {name}.", input_schema=_OBJECT)
        for name in _listed_names()
    ]
    return types.ListToolsResult(tools=[TOOLS[0], *extra])


async def listing_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name in _listed_names():
        return _text(f"{params.name} here")
    return await call_tool(ctx, params)


async def seen_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    result = await call_tool(ctx, params)
    if params.name == "whoami":
        with open(_given["seen"], "a", encoding="utf-8") as file:
            file.write(result.content[0].text + "\n")  # type: ignore[union-attr]
    return result


AGENT: Server[Any] = Server("agent", on_list_tools=agent_list_tools, on_call_tool=agent_call_tool)
LISTING: Server[Any] = Server(
    "listing", on_list_tools=listing_list_tools, on_call_tool=listing_call_tool
)
SEEN: Server[Any] = Server("seen", on_list_tools=list_tools, on_call_tool=seen_call_tool)


def _http(server: Server[Any], fd: int) -> None:
    import uvicorn

    listening = socket.socket(fileno=fd)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[listening])


def main(argv: list[str]) -> None:
    mode = argv[0] if argv else "stdio"
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends it
    if mode == "stdio":
        anyio.run(_stdio)
    elif mode == "exit":
        print("cannot start: no configuration", file=sys.stderr, flush=True)
        sys.exit(7)
    elif mode == "http":
        import uvicorn

        listening = socket.socket(fileno=int(argv[1]))
        config = uvicorn.Config(SERVER.streamable_http_app(), log_level="warning", lifespan="on")
        uvicorn.Server(config).run(sockets=[listening])
    elif mode == "agent":
        _given["tag"] = argv[1]
        anyio.run(_stdio, AGENT)
    elif mode == "listing":
        _given["listing"] = argv[1]
        anyio.run(_stdio, LISTING)
    elif mode == "http-seen":
        _given["seen"] = argv[2]
        _http(SEEN, int(argv[1]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
