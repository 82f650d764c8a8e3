"""Starting an agent's MCP servers, keeping them for an activation, listing their tools.

A stdio server is started inside the agent's sandbox, at its first use in an
activation: the workspace at ``/workspace``, no network unless the agent holds
a ``network`` grant then, the operator's memory and process limits, and only
the variables and vault secrets the spec gives it. The Python environment the
worker runs in is readable (servers from PyPI live there), and so are the
folders the spec ``mounts``; nothing else of the host is.

:class:`Servers` keeps one connection per server for the activation (the
sandbox session holds it, and closes it with the session: when the activation
ends, hibernates or loses its lease, no server process is left). A server
found dead is started again once; a call it was serving fails as a tool
error with its stderr's tail, and is never sent again (it may have acted).

Each (re)start lists the server's tools; when they differ from the list the
agent was shown, the new list is journaled (``mcp_tools_listed``, shown by
``stead trace``) and offered from the agent's next activation on, so a
resumed agent is shown what it was shown.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...canonical import dumps, sha256_hex
from ...errors import McpServerError, SecretError
from ...sandbox.base import Limits, Sandbox
from ...sandbox.bwrap import interpreter_paths
from ..base import ToolContext
from .client import McpClient
from .config import fill_secrets

if TYPE_CHECKING:
    from ...spec import AgentSpec

KEPT = "mcp-servers"
"""The key the sandbox session keeps an activation's :class:`Servers` under."""
RESTARTS = 1
SERVER_PROCESSES = 256


def listing_digest(tools: list[dict[str, Any]]) -> str:
    return sha256_hex(dumps(tools))


class Servers:
    """The MCP servers of one activation: started at first use, closed with it."""

    def __init__(self) -> None:
        self._clients: dict[str, McpClient] = {}
        self._restarts: dict[str, int] = {}
        self._seen: dict[str, str] = {}  # server -> the digest of its latest listing
        self._lock = threading.Lock()

    def client(self, ctx: ToolContext, server: Mapping[str, Any]) -> McpClient:
        """A live connection to ``server``, started (or started again once) if needed."""
        name = str(server["name"])
        if "url" in server and not ctx.network:
            # the grant is checked at every call, not only when the server was reached
            with self._lock:
                stale = self._clients.pop(name, None)
            if stale is not None:
                stale.close()
            raise McpServerError(_offline(name))
        with self._lock:
            found = self._clients.get(name)
            if found is not None and found.alive:
                return found
            if found is not None:
                tail = found.stderr_tail()
                found.close()
                del self._clients[name]
                if self._restarts.get(name, 0) >= RESTARTS:
                    raise McpServerError(
                        f"MCP server {name!r} stopped again after it was restarted; its calls "
                        f"fail until the agent's next activation. Its stderr ended: "
                        f"{tail.strip() or '(nothing)'}"
                    )
                self._restarts[name] = self._restarts.get(name, 0) + 1
            client = connect(ctx, server)
            self._clients[name] = client
        self._relist(ctx, server, client)
        return client

    def _relist(self, ctx: ToolContext, server: Mapping[str, Any], client: McpClient) -> None:
        """Journal the server's tools if they are not the ones the agent was shown."""
        tools = client.list_tools()
        digest = listing_digest(tools)
        name = str(server["name"])
        if digest in (server.get("listed"), self._seen.get(name)):
            return
        self._seen[name] = digest
        if ctx.note is not None:
            ctx.note("mcp_tools_listed", server=name, tools=tools, digest=digest, changed=True)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


def _offline(name: str) -> str:
    return (
        f"MCP server {name!r} is reached over the network, and the agent holds no network "
        "grant now; a person grants it (stead grant ID network --valid-for 1h)"
    )


def servers_of(ctx: ToolContext) -> tuple[Servers, bool]:
    """The activation's servers (kept by its sandbox session), or a new set that the
    caller must close (a tool called outside an activation); and which it is."""
    keep = getattr(ctx.sandbox, "keep", None)
    if keep is None:
        return Servers(), False
    kept: Servers = keep(KEPT, Servers)
    return kept, True


def call_server(
    ctx: ToolContext, server: Mapping[str, Any], tool: str, args: Mapping[str, Any]
) -> dict[str, Any]:
    """Call ``tool`` on ``server`` for the call ``ctx`` serves."""
    servers, kept = servers_of(ctx)
    try:
        client = servers.client(ctx, server)
        return client.call_tool(tool, args, float(server.get("timeout") or 60.0))
    finally:
        if not kept:
            servers.close()


def list_server(ctx: ToolContext, server: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Start ``server`` once, list its tools, stop it (``stead mcp ls``, creation)."""
    with connect(ctx, server) as client:
        return client.list_tools()


def connect(ctx: ToolContext, server: Mapping[str, Any]) -> McpClient:
    """Start a stdio server in the sandbox, or reach a server over HTTP."""
    name = str(server["name"])
    secrets = {k: v for k, v in ctx.secrets.items() if k in (server.get("secrets") or ())}
    missing = sorted(set(server.get("secrets") or ()) - set(secrets))
    if missing:
        raise McpServerError(
            f"MCP server {name!r} needs vault secret(s) {', '.join(missing)}, which are not "
            f"set; set them with `stead secret set`"
        )
    if "url" in server:
        if not ctx.network:
            raise McpServerError(_offline(name))
        headers = {k: fill_secrets(v, secrets) for k, v in (server.get("headers") or {}).items()}
        return McpClient.http(str(server["url"]), headers, name=name)
    argv, readable = resolve(list(server["command"]))
    env = {
        "PATH": f"{Path(sys.prefix) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        **{k: fill_secrets(v, secrets) for k, v in (server.get("env") or {}).items()},
        **secrets,
    }
    sandbox = _sandbox(ctx)
    # the operator's ceiling, and a bound on processes; no address-space limit of
    # our own, which runtimes that reserve much (Node's) cannot start under
    limits = Limits(memory_bytes=None, processes=SERVER_PROCESSES)
    if ctx.ceiling is not None:
        limits = limits.capped_by(ctx.ceiling)
    ro = [*readable, *(server.get("mounts") or [])]

    def start(command: Any) -> Any:
        return sandbox.spawn(
            command, ctx.workspace, env=env, limits=limits, network=ctx.network, ro_paths=ro
        )

    return McpClient.stdio(argv, start=start, name=name)


def resolve(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` with its program found (the worker's Python environment first, then
    the machine's), and the host folders the sandbox must let it read."""
    readable = list(interpreter_paths())
    program = argv[0]
    if program in ("python", "python3"):
        return [sys.executable, *argv[1:]], readable
    if not os.path.isabs(program):
        path = f"{Path(sys.prefix) / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        found = shutil.which(program, path=path)
        if found is None:
            raise McpServerError(
                f"MCP server command {program!r} is not installed on this worker (looked in "
                f"the Python environment and PATH); install it, or give its full path"
            )
        program = found
    folder = str(Path(program).parent)
    if not folder.startswith(("/usr/", "/bin", "/sbin", "/lib")) and folder not in readable:
        readable.append(folder)
    return [program, *argv[1:]], readable


def _sandbox(ctx: ToolContext) -> Sandbox:
    if ctx.sandbox is not None:
        return ctx.sandbox
    from ...sandbox.select import select

    return select()


def first_listings(servers: list[Mapping[str, Any]], base: ToolContext) -> list[dict[str, Any]]:
    """Each server's tools, listed once when the agent is made (the event data of
    its first ``mcp_tools_listed``): the list the agent is shown until a server
    changes it. ``base`` is the context a server starts in (the new workspace,
    the vault secrets it names, whether the spec grants the network)."""
    out = []
    for server in servers:
        try:
            tools = list_server(base, server)
        except McpServerError as exc:
            raise McpServerError(
                f"the agent's MCP server {server['name']!r} could not be listed, so the "
                f"agent was not made: {exc}"
            ) from None
        out.append({"server": server["name"], "tools": tools, "digest": listing_digest(tools)})
    return out


def _listing_secrets(rt: Any, spec: AgentSpec, agent_id: str, names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    try:
        for server in spec.mcp:  # a server's URL gets only secrets bound to its host
            if "url" in server and server.get("secrets"):
                rt.vault().for_call(spec.tenant, agent_id, server["secrets"], url=server["url"])
        found: dict[str, str] = rt.vault().for_call(spec.tenant, agent_id, names)
    except SecretError as exc:
        raise SecretError(
            f"the spec's MCP servers are started to list their tools, and need vault "
            f"secrets for it; nothing was made: {exc}"
        ) from None
    return found


def listing_context(
    rt: Any, spec: AgentSpec, agent_id: str, root: Path, network: bool
) -> ToolContext:
    """The context a spec's servers are started in to be listed: the runtime's
    sandbox over ``root``, and the vault secrets they name."""
    names = sorted({name for server in spec.mcp for name in server.get("secrets") or ()})
    return ToolContext(
        agent_id=agent_id,
        tenant=spec.tenant,
        call_id="mcp-listing",
        idempotency_key="",
        workspace=root,
        sandbox=rt.sandbox,
        secrets=_listing_secrets(rt, spec, agent_id, names),
        network=network,
    )


def listings(rt: Any, spec: AgentSpec, agent_id: str, root: Path) -> list[dict[str, Any]]:
    """The first listings of a new agent's MCP servers (none without servers): each
    started in the runtime's sandbox over the agent's new workspace, given the vault
    secrets it names, and the network only if the spec's scope grants it."""
    if not spec.mcp:
        return []
    network = any(g.get("tool") == "network" for g in spec.scope or ())
    return first_listings(list(spec.mcp), listing_context(rt, spec, agent_id, root, network))
