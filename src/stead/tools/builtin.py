"""The built-in tools: files in the workspace, and a shell command line.

Paths are relative to the agent's workspace and cannot leave it: the file tools
open every step of a path without following links (:mod:`stead.sandbox.beneath`),
so a link or a folder swapped for one mid-call never leads out. ``shell`` runs
in the workspace with a scrubbed environment; putting it inside an OS sandbox is
the sandbox package's job.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ..errors import WorkspaceFull
from ..sandbox import beneath
from ..sandbox.base import Limits
from ..sandbox.paths import shown
from .base import ToolContext, tool

MAX_READ = 256 * 1024
MAX_OUTPUT = 64 * 1024
SHELL_TIMEOUT = 120.0


@tool(effect="read_only")
def read_file(path: str, ctx: ToolContext) -> str:
    """Return the text of a file in the workspace."""
    try:
        data = beneath.read_bytes(ctx.workspace, path, MAX_READ)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise FileNotFoundError(
            f"no file {path!r} in the workspace; list_files shows them"
        ) from None
    return data.decode("utf-8", errors="replace")


@tool(effect="idempotent")
def write_file(path: str, content: str, ctx: ToolContext) -> dict[str, Any]:
    """Write a text file in the workspace, replacing it whole."""
    data = content.encode("utf-8")
    if ctx.quota_bytes is not None:
        _check_room(ctx, path, len(data), ctx.quota_bytes)
    # the lease is checked as late as can be: a worker paused past its lease
    # must not rewrite a file another worker has since moved on from
    beneath.write_atomic(ctx.workspace, path, data, ctx.call_id, before=ctx.check_lease)
    return {"path": path, "bytes": len(data)}


# the runtime's own listing of the agent's workspace is system data, as a receipt
# is: a file the agent is told to act on by its name is not a third party's choice
@tool(effect="read_only", trusted=True)
def list_files(ctx: ToolContext, path: str = ".") -> list[str]:
    """List the files under a folder of the workspace, relative to the workspace."""
    try:
        # a name with bytes that are not UTF-8 (a file no manifest keeps, not yet
        # removed) is shown with escapes: the result must be journaled as text
        return [shown(rel) for rel, _fd, _name in beneath.walk_files(ctx.workspace, path or ".")]
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(
            f"no folder {path!r} in the workspace; list_files with no path lists it all"
        ) from None


@tool(effect="effectful")
def shell(command: str, ctx: ToolContext, timeout: float = SHELL_TIMEOUT) -> dict[str, Any]:
    """Run a command line in the workspace, in the sandbox; return its exit code and output."""
    # the operator's ceiling holds whatever timeout the model asked for
    limits = ctx.capped(Limits(wall_seconds=timeout, output_bytes=MAX_OUTPUT))
    result = ctx.run(["/bin/sh", "-c", command], limits=limits)
    out = result.to_json()
    if result.timed_out:
        out["timeout"] = limits.wall_seconds
    return out


def _check_room(ctx: ToolContext, path: str, size: int, quota: int) -> None:
    """Refuse a write that would take the workspace past its quota."""
    target = "/".join(beneath.parts_of(path))
    total = size
    for rel, dir_fd, name in beneath.walk_files(ctx.workspace):
        if rel != target:
            with contextlib.suppress(OSError):
                total += os.lstat(name, dir_fd=dir_fd).st_size
    if total > quota:
        raise WorkspaceFull(
            f"writing {size} bytes to {path!r} would take the workspace past its quota "
            f"of {quota // 2**20} MiB; remove files first, or ask the operator to raise "
            "limits.workspace_mb"
        )


# imported last: the memory tools are declared with this package's decorator
from ..memories.tools import recall_memories, save_memory  # noqa: E402

BUILTINS = {
    f.__name__: f for f in (read_file, write_file, list_files, shell, save_memory, recall_memories)
}
