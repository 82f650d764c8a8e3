"""A spec's ``mcp:`` section: the MCP servers whose tools an agent may call.

Each entry names a server and says how to reach it, either a command that
speaks MCP on its standard input and output (started inside the agent's
sandbox) or the URL of a server over streamable HTTP (reached only under the
agent's ``network`` grant)::

    mcp:
      - name: git
        command: [mcp-server-git]
        env: {GIT_AUTHOR_NAME: stead}       # plain variables
        mounts: [/opt/servers]              # host folders it may read
        secrets: [GITHUB_TOKEN]             # vault secrets, as variables of that name
        effect: effectful                   # its tools' effect class, unless...
        effects: {git_status: read_only}    # ...one is named here
        reconcile: {git_commit: "hooks:commit_made"}   # asked after a crash cut a call off
        timeout: 60                         # seconds a call may take
      - name: docs
        url: https://docs.example/mcp
        headers: {Authorization: "Bearer {secret:DOCS_TOKEN}"}
        secrets: [DOCS_TOKEN]

:func:`parse_servers` checks it and returns the JSON stored with the agent;
every problem names the field, what was found and what is allowed.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import SpecError

SERVER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,23}$")
"""A server's name starts its tools' names, which every provider must accept."""
EFFECTS = ("read_only", "idempotent", "effectful")
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 86_400.0
_KEYS = ("name", "command", "url", "env", "secrets", "headers", "mounts", "effect", "effects",
         "reconcile", "timeout")  # fmt: skip
_SECRET_REF = re.compile(r"\{secret:([A-Za-z0-9_.-]+)\}")


_URL = r"^https?://[^\s/]+"
_HELP: dict[str, tuple[str, dict[str, Any]]] = {
    "name": ("The server's name, which starts its tools' names: 1 to 24 lowercase letters, "
             "digits, '_' or '-'.", {"type": "string", "pattern": SERVER_NAME.pattern}),
    "command": ("The argv of a server speaking MCP on stdio, started in the agent's sandbox "
                "(no shell).", {"type": "array", "minItems": 1,
                                "items": {"type": "string", "minLength": 1}}),
    "url": ("The URL of a streamable HTTP server, reached only under a network grant.",
            {"type": "string", "pattern": _URL}),
    "env": ("Variables for a command server; {secret:NAME} in a value is filled in.",
            {"type": "object", "additionalProperties": {"type": "string"}}),
    "secrets": ("Vault secrets the server may use.",
                {"type": "array", "items": {"type": "string", "minLength": 1}}),
    "headers": ("Headers sent to a url server; {secret:NAME} in a value is filled in.",
                {"type": "object", "additionalProperties": {"type": "string"}}),
    "mounts": ("Absolute host folders a command server may read.",
               {"type": "array", "items": {"type": "string", "pattern": "^/"}}),
    "effect": ("The effect class of its tools (default: effectful).",
               {"enum": [*EFFECTS, None]}),
    "effects": ("Effect classes of single tools, by name.",
                {"type": "object", "additionalProperties": {"enum": list(EFFECTS)}}),
    "reconcile": ("module:function hooks, by tool name, asked after a crash cut a call off.",
                  {"type": "object", "additionalProperties": {"type": "string",
                                                              "pattern": ":"}}),
    "timeout": ("Seconds one call may take.", {"type": "number", "exclusiveMinimum": 0,
                                               "maximum": MAX_TIMEOUT,
                                               "default": DEFAULT_TIMEOUT}),
}  # fmt: skip


def servers_schema() -> dict[str, Any]:
    """JSON Schema of a spec's ``mcp:``, as :func:`parse_servers` reads it."""
    server = {
        "type": "object",
        "properties": {key: {"description": _HELP[key][0], **_HELP[key][1]} for key in _KEYS},
        "required": ["name"],
        "oneOf": [
            {"title": "a command server", "required": ["command"]},
            {"title": "a url server", "required": ["url"]},
        ],
        "additionalProperties": False,
    }
    return {"type": ["array", "null"], "items": server}


def _fail(where: str, problem: str) -> SpecError:
    return SpecError(f"spec field '{where}': {problem}")


def parse_servers(value: Any) -> list[dict[str, Any]]:
    """The checked ``mcp:`` section, as stored with the agent."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail("mcp", "must be a list of servers, each {name: NAME, command: [...]} or "
                    "{name: NAME, url: URL}")  # fmt: skip
    servers: list[dict[str, Any]] = []
    for i, entry in enumerate(value):
        server = _server(entry, f"mcp[{i}]")
        if any(s["name"] == server["name"] for s in servers):
            raise _fail(f"mcp[{i}].name", f"two servers are named {server['name']!r}")
        servers.append(server)
    return servers


def _server(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise _fail(where, "must be a mapping: {name: NAME, command: [ARGV...]} or "
                    "{name: NAME, url: URL}")  # fmt: skip
    unknown = sorted(set(entry) - set(_KEYS), key=str)
    if unknown:
        raise _fail(f"{where}.{unknown[0]}", f"is not a setting; use {', '.join(_KEYS)}")
    name = entry.get("name")
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise _fail(f"{where}.name", f"must be 1 to 24 lowercase letters, digits, '_' or '-', "
                    f"starting with a letter; got {name!r}")  # fmt: skip
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise _fail(where, "needs exactly one of command (a stdio server's argv) or url "
                    "(a streamable HTTP server)")  # fmt: skip
    out: dict[str, Any] = {"name": name}
    if command is not None:
        if not (isinstance(command, list) and command and all(
                isinstance(a, str) and a for a in command)):  # fmt: skip
            raise _fail(f"{where}.command", "must be a non-empty list of strings (the argv; "
                        "no shell is involved)")  # fmt: skip
        out["command"] = list(command)
        mounts = entry.get("mounts", [])
        if not isinstance(mounts, list) or not all(
            isinstance(m, str) and m.startswith("/") for m in mounts
        ):
            raise _fail(f"{where}.mounts", "must be a list of absolute host paths the server "
                        "may read (its installation, say)")  # fmt: skip
        out["mounts"] = list(mounts)
    else:
        if not isinstance(url, str) or not re.match(_URL, url):
            raise _fail(f"{where}.url", f"must be an http:// or https:// URL, got {url!r}")
        out["url"] = url
    secrets = entry.get("secrets", [])
    if not isinstance(secrets, list) or not all(isinstance(s, str) and s for s in secrets):
        raise _fail(f"{where}.secrets", "must be a list of vault secret names")
    out["secrets"] = list(secrets)
    for key in ("env", "headers"):
        mapping = entry.get(key, {})
        if not isinstance(mapping, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in mapping.items()
        ):
            raise _fail(f"{where}.{key}", "must map names to text values")
        if key == "headers" and mapping and url is None:
            raise _fail(f"{where}.headers", "are for a server reached by url")
        if key == "env" and mapping and command is None:
            raise _fail(f"{where}.env", "is for a server started by command")
        for ref in (r for v in mapping.values() for r in _SECRET_REF.findall(v)):
            if ref not in secrets:
                raise _fail(f"{where}.{key}", f"refers to secret {ref!r}, which is not in "
                            f"{where}.secrets")  # fmt: skip
        out[key] = dict(mapping)
    effect = entry.get("effect")
    if effect is not None and effect not in EFFECTS:
        raise _fail(f"{where}.effect", f"must be one of {', '.join(EFFECTS)}, got {effect!r}")
    out["effect"] = effect
    effects = entry.get("effects", {})
    if not isinstance(effects, dict) or not all(
        isinstance(k, str) and v in EFFECTS for k, v in effects.items()
    ):
        raise _fail(f"{where}.effects", f"must map the server's tool names to one of "
                    f"{', '.join(EFFECTS)}")  # fmt: skip
    out["effects"] = dict(effects)
    reconcile = entry.get("reconcile", {})
    if not isinstance(reconcile, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and ":" in v for k, v in reconcile.items()
    ):
        raise _fail(f"{where}.reconcile", "must map the server's tool names to the "
                    "module:function of a reconcile hook, f(args, ctx) -> done | not_done | "
                    "unknown")  # fmt: skip
    out["reconcile"] = dict(reconcile)
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
        0 < timeout <= MAX_TIMEOUT
    ):  # fmt: skip
        raise _fail(f"{where}.timeout", f"must be seconds above 0 and at most {MAX_TIMEOUT:.0f}, "
                    f"got {timeout!r}")  # fmt: skip
    out["timeout"] = float(timeout)
    return out


def fill_secrets(text: str, secrets: dict[str, str]) -> str:
    """``text`` with each ``{secret:NAME}`` replaced by the secret's value."""
    return _SECRET_REF.sub(lambda m: secrets.get(m.group(1), ""), text)
