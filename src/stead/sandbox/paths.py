"""Confining paths to a workspace."""

from __future__ import annotations

from pathlib import Path

from ..errors import PathEscape


def resolve_inside(root: Path, rel: str) -> Path:
    """The absolute path of ``rel`` under ``root``; refuse anything that escapes it.

    Symbolic links are resolved first, so a link pointing out of the workspace
    is refused like ``../``.
    """
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\x00" in rel:
        raise PathEscape(f"path {rel!r} must be relative to the workspace, e.g. 'src/app.py'")
    base = root.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise PathEscape(f"path {rel!r} leads outside the agent's workspace; use a path inside it")
    return target
