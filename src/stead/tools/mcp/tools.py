"""An MCP server's tools as stead tools: names, effect classes, schemas, results.

A listed MCP tool becomes a :class:`~stead.tools.base.Tool` like any Python
tool, so everything stead does for a call applies to it: the governance gate,
the monitors, provenance, redaction of its results, journaling of its intent
and outcome. What is particular to MCP is decided here:

* **Names.** ``SERVER__TOOL``, with anything a provider would refuse replaced
  by ``_``; a name that had to change, or is longer than 64 characters, ends
  with six hex digits of the original, so two tools never share a name.
* **Effect classes.** The spec decides (``effects`` per tool, then the
  server's ``effect``); without a word from it, MCP's annotations are hints:
  ``readOnlyHint`` is ``read_only``, ``idempotentHint`` is ``idempotent``,
  anything else ``effectful``. A hint never overrides the spec, and
  :func:`effect_of` says where the two disagree (``stead mcp ls`` shows it).
* **Arguments** are checked against the tool's ``inputSchema`` before a call.
* **Results.** Text parts are kept as text (a long one is stored whole as a
  blob and its start kept); images, audio and binary resources are stored as
  blobs and named by digest; structured content is
  kept as JSON, and a text part that only repeats it as JSON (as servers
  send it, for older clients) is dropped, so the model sees it once. A
  result the server marks as an error is the model's to see, as a failed call.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ...canonical import sha256_hex
from ...errors import ToolError
from ..base import Effect, ReconcileHook, Tool, ToolContext
from ..registry import import_object

MAX_NAME = 64
MAX_SCHEMA_CHARS = 64 * 1024
"""A tool whose input schema, as compact JSON, is longer than this is not offered."""
LARGE_TEXT = 16 * 1024
"""A text part longer than this is stored whole as a blob; the journal keeps its start."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

CallServer = Callable[[ToolContext, Mapping[str, Any], str, Mapping[str, Any]], dict[str, Any]]
"""Calls a tool on a server: (context, server config, tool name, arguments) -> the
CallToolResult as wire JSON."""


def tool_name(server: str, tool: str) -> str:
    """The name the model calls an MCP tool by (see the module's docstring)."""
    raw = f"{server}__{tool}"
    safe = _UNSAFE.sub("_", raw)
    if safe == raw and len(safe) <= MAX_NAME:
        return safe
    return f"{safe[: MAX_NAME - 7]}_{sha256_hex(raw)[:6]}"


def hinted(tool: Mapping[str, Any]) -> Effect:
    """The effect class a tool's annotations suggest."""
    notes = tool.get("annotations") or {}
    if notes.get("readOnlyHint") is True:
        return Effect.READ_ONLY
    if notes.get("idempotentHint") is True:
        return Effect.IDEMPOTENT
    return Effect.EFFECTFUL


def effect_of(server: Mapping[str, Any], tool: Mapping[str, Any]) -> tuple[Effect, str, str | None]:
    """The tool's effect class, where it came from (``spec`` or ``hints``), and how
    the server's hints disagree with the spec, if they do."""
    name = str(tool.get("name"))
    said = (server.get("effects") or {}).get(name) or server.get("effect")
    hint = hinted(tool)
    if said is None:
        return hint, "hints", None
    effect = Effect(said)
    if hint is effect:
        return effect, "spec", None
    return effect, "spec", f"the server's hints say {hint.value}; the spec's {effect.value} holds"


def schema_problem(tool: Mapping[str, Any]) -> str | None:
    """Why a listed tool cannot be offered (its input schema is unusable), or None."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        return "its inputSchema is not a JSON object schema"
    # offered, a schema goes to the model with every request
    try:
        size = len(json.dumps(schema, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError):
        return "its inputSchema is not a JSON object schema"
    if size > MAX_SCHEMA_CHARS:
        return f"its inputSchema is larger than {MAX_SCHEMA_CHARS // 1024} KiB"
    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError as exc:
        return f"its inputSchema is not a valid JSON schema: {exc.message}"
    return None


def make_tools(
    server: Mapping[str, Any],
    listed: list[Mapping[str, Any]],
    call: CallServer,
    load: Callable[[str], Any] | None = None,
) -> dict[str, Tool]:
    """The stead tools for a server's listed tools (those with a usable schema);
    ``load`` imports the reconcile hooks the spec names (``module:function``)."""
    tools: dict[str, Tool] = {}
    for entry in listed:
        if schema_problem(entry) is not None:
            continue
        remote = str(entry["name"])
        effect, _, _ = effect_of(server, entry)
        name = tool_name(str(server["name"]), remote)
        description = str(entry.get("description") or "").strip()
        tools[name] = Tool(
            name=name,
            func=functools.partial(_run, call, dict(server), remote),
            effect=effect,
            schema=dict(entry["inputSchema"]),
            description=f"{description}\n(tool {remote!r} of MCP server {server['name']})".strip(),
            wants_ctx=True,
            secrets=tuple(server.get("secrets") or ()),
            secrets_to=server.get("url"),
            explicit_schema=True,
            reconcile=_hook(server, remote, load),
        )
    return tools


def _hook(
    server: Mapping[str, Any], remote: str, load: Callable[[str], Any] | None
) -> ReconcileHook | None:
    ref = (server.get("reconcile") or {}).get(remote)
    if ref is None or load is None:
        return None
    hook = load(ref)
    if not callable(hook):
        raise ToolError(f"reconcile hook {ref!r} of MCP tool {remote!r} is not a function")
    return cast(ReconcileHook, hook)


def check_hooks(spec: Mapping[str, Any]) -> None:
    """Refuse a spec whose MCP reconcile hooks do not import (before it is stored)."""
    base = [str(spec.get("base_dir", "."))]
    for server in spec.get("mcp") or []:
        for remote in server.get("reconcile") or {}:
            _hook(server, remote, lambda r: import_object(r, base, "reconcile hook"))


def journaled_tools(spec: Mapping[str, Any], listings: list[Mapping[str, Any]],
                    call: CallServer) -> dict[str, Tool]:  # fmt: skip
    """The MCP tools an agent is shown: its spec's servers, each as its latest
    journaled listing (the ``mcp_tools_listed`` events' data, oldest first) has it."""
    latest = {str(d["server"]): d for d in listings}
    base = [str(spec.get("base_dir", "."))]

    def load(ref: str) -> Any:
        return import_object(ref, base, "reconcile hook")

    tools: dict[str, Tool] = {}
    for server in spec.get("mcp") or []:
        listing = latest.get(str(server["name"]))
        if listing is not None:
            known = {**server, "listed": listing["digest"]}
            tools |= make_tools(known, list(listing["tools"]), call, load)
    return tools


def _run(
    call: CallServer, server: Mapping[str, Any], remote: str, ctx: ToolContext, **args: Any
) -> Any:
    result = call(ctx, server, remote, args)
    output = render(result, ctx)
    if result.get("isError"):
        raise ToolError(
            f"MCP tool {remote!r} of server {server['name']} failed: {_text_of(output)}"
        )
    return output


def render(result: Mapping[str, Any], ctx: ToolContext) -> Any:
    """A CallToolResult as the journal keeps it: one text part as a string; else
    the parts (binary ones as blobs) and the structured content."""
    parts = [_part(p, ctx) for p in result.get("content") or [] if isinstance(p, Mapping)]
    structured = result.get("structuredContent")
    if structured is None and len(parts) == 1 and set(parts[0]) == {"type", "text"}:
        return parts[0]["text"]
    if structured is not None:  # servers repeat it as JSON text: shown once, as JSON
        parts = [p for p in parts if not _repeats(p, structured)]
    out: dict[str, Any] = {"content": parts}
    if structured is not None:
        out["structured"] = structured
    return out


def _repeats(part: Mapping[str, Any], structured: Any) -> bool:
    """Whether a text part is the structured content written out as JSON."""
    if part.get("type") != "text" or part.get("cut"):
        return False
    try:
        return bool(json.loads(str(part.get("text"))) == structured)
    except (ValueError, RecursionError):
        return False


def _part(part: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    kind = str(part.get("type"))
    if kind == "text":
        text = str(part.get("text", ""))
        if len(text) <= LARGE_TEXT or ctx.put_blob is None:
            return {"type": "text", "text": text}
        # kept whole as a blob; the journal (and the model) get its start
        digest = ctx.put_blob(text.encode("utf-8"))
        return {"type": "text", "text": text[:LARGE_TEXT], "cut": True, "chars": len(text),
                "blob": digest}  # fmt: skip
    if kind in ("image", "audio"):
        return {"type": kind, "mimeType": part.get("mimeType"), **_blob(part.get("data"), ctx)}
    if kind == "resource":
        res = part.get("resource") or {}
        out = {"type": "resource", "uri": res.get("uri"), "mimeType": res.get("mimeType")}
        if "text" in res:
            return {**out, "text": str(res["text"])}
        return {**out, **_blob(res.get("blob"), ctx)}
    if kind == "resource_link":
        return {"type": "resource_link", "uri": part.get("uri"), "name": part.get("name")}
    return {"type": kind, "note": "a content part stead does not know; left out"}


def _blob(data: Any, ctx: ToolContext) -> dict[str, Any]:
    """Binary content, stored as a blob (in the journal only its digest and size)."""
    try:
        raw = base64.b64decode(str(data or ""), validate=True)
    except ValueError:
        return {"note": "its data was not base64; left out"}
    if ctx.put_blob is None:
        return {"bytes": len(raw), "sha256": sha256_hex(raw.decode("latin-1"))}
    return {"bytes": len(raw), "blob": ctx.put_blob(raw)}


def _text_of(output: Any) -> str:
    if isinstance(output, str):
        return output
    texts = [p.get("text", "") for p in output.get("content", []) if p.get("type") == "text"]
    return " ".join(texts) or "(no text)"
