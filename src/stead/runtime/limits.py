"""The operator's limits on what an agent's tools may use.

A spec's ``limits:`` are the operator's word, and a model's arguments never
loosen them: ``command_seconds`` caps the wall time of every command a tool
runs (``shell``'s ``timeout`` included), ``workspace_mb`` caps the
workspace's bytes and ``workspace_files`` how many files and folders it holds.
The byte quota is held three ways, each a backstop for the one before:

1. ``write_file`` refuses a write that would pass it, before writing;
2. a command may not write any one file larger than the quota (``ulimit -f``);
3. after every call that may change files, the scan stops as soon as the
   files it has seen add up to more than the quota, before storing what lies
   past it; the workspace is then put back as it was before the call, and the
   call's result is an error that says so.

The scan also stops past ``workspace_files`` entries, and at a file every
restore would refuse (:func:`stead.sandbox.paths.check_relative`), failing
the call the same way.

A command can still fill the disk up to the quota several times over *while*
it runs (many files, each under the per-file cap); what it leaves behind is
undone at its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import PathEscape, WorkspaceFull
from ..sandbox.base import Limits
from ..sandbox.workspace import Quota
from ..spec import DEFAULT_COMMAND_SECONDS, DEFAULT_WORKSPACE_FILES, DEFAULT_WORKSPACE_MB
from ..tools.base import Effect, Tool

if TYPE_CHECKING:
    from .activation import Activation

_NO_CAP = 2**62


def quota(spec: Mapping[str, Any]) -> Quota:
    """The bytes, and the files and folders, a stored spec lets a workspace hold."""
    limits = spec.get("limits") or {}
    mib, files = limits.get("workspace_mb", DEFAULT_WORKSPACE_MB), limits.get("workspace_files")
    return Quota(int(mib) * 2**20, int(files or DEFAULT_WORKSPACE_FILES))


def tool_limits(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ceiling`` and ``quota_bytes`` a stored spec gives its tools' contexts.

    The ceiling caps wall time and, per file, the quota; it leaves the other
    limits to what a tool asks (``Limits``' defaults otherwise).
    """
    seconds = float((spec.get("limits") or {}).get("command_seconds", DEFAULT_COMMAND_SECONDS))
    quota_bytes = quota(spec).max_bytes
    ceiling = Limits(
        wall_seconds=seconds,
        cpu_seconds=None,
        memory_bytes=None,
        processes=None,
        output_bytes=_NO_CAP,
        file_bytes=quota_bytes,
    )
    return {"ceiling": ceiling, "quota_bytes": quota_bytes}


def settle_workspace(
    act: Activation, tool: Tool, result: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """After a call: the workspace delta to record, and the result to record.

    A call that leaves the workspace over its quota, or leaves a file no
    workspace path can name, has its file changes undone and its result
    turned into an error that says which.
    """
    if tool.effect is Effect.READ_ONLY:
        return result, {}
    try:
        return result, act.scan_delta(quota(act.record.spec))
    except (WorkspaceFull, PathEscape) as exc:
        act.workspace.restore(act.manifest)  # the offending files go with the rest
        failed = {"ok": False, "error": f"{exc}; this call's changes to the files were undone"}
        if "output" in result:
            failed["output"] = result["output"]
        return failed, act.scan_delta()
