"""The built-in tools: files in the workspace, and a shell command line.

Paths are relative to the agent's workspace and cannot leave it. ``shell`` runs
in the workspace with a scrubbed environment; putting it inside an OS sandbox is
the sandbox package's job.
"""

from __future__ import annotations

import os
from typing import Any

from ..sandbox.base import Limits
from ..sandbox.paths import resolve_inside
from .base import ToolContext, tool

MAX_READ = 256 * 1024
MAX_OUTPUT = 64 * 1024
SHELL_TIMEOUT = 120.0


@tool(effect="read_only")
def read_file(path: str, ctx: ToolContext) -> str:
    """Return the text of a file in the workspace."""
    target = resolve_inside(ctx.workspace, path)
    if not target.is_file():
        raise FileNotFoundError(f"no file {path!r} in the workspace; list_files shows them")
    data = target.read_bytes()[:MAX_READ]
    return data.decode("utf-8", errors="replace")


@tool(effect="idempotent")
def write_file(path: str, content: str, ctx: ToolContext) -> dict[str, Any]:
    """Write a text file in the workspace, replacing it whole."""
    target = resolve_inside(ctx.workspace, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{ctx.call_id}.tmp")
    tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, target)
    return {"path": path, "bytes": len(content.encode("utf-8"))}


@tool(effect="read_only")
def list_files(ctx: ToolContext, path: str = ".") -> list[str]:
    """List the files under a folder of the workspace, relative to the workspace."""
    root = ctx.workspace.resolve()
    base = resolve_inside(ctx.workspace, path) if path not in ("", ".") else root
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            out.append(os.path.relpath(full, root).replace(os.sep, "/"))
    return out


@tool(effect="effectful")
def shell(command: str, ctx: ToolContext, timeout: float = SHELL_TIMEOUT) -> dict[str, Any]:
    """Run a command line in the workspace, in the sandbox; return its exit code and output."""
    result = ctx.run(
        ["/bin/sh", "-c", command],
        limits=Limits(wall_seconds=timeout, output_bytes=MAX_OUTPUT),
    )
    out = result.to_json()
    if result.timed_out:
        out["timeout"] = timeout
    return out


BUILTINS = {f.__name__: f for f in (read_file, write_file, list_files, shell)}
