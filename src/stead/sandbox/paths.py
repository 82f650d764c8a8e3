"""Confining paths to a workspace."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import PathEscape

_SHA256 = re.compile(r"[0-9a-f]{64}")


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


def check_relative(rel: object) -> str:
    """``rel`` if it is a plain relative path inside a workspace; else :class:`PathEscape`.

    A path read from an archive, a snapshot or the store names a file to write,
    so it must be one: components joined by ``/``, none of them empty, ``.`` or
    ``..``, no NUL, not absolute. A backslash is read as a separator too, so
    ``..\\x`` is refused whatever system later reads the path; a backslash
    inside a name (``a\\b``) is an ordinary character on Linux and passes. Pure:
    it looks at the text only, never at the disk.
    """
    why = _not_plain(rel)
    if why:
        raise PathEscape(
            f"path {rel!r} is not a plain relative path inside the workspace ({why}); "
            "a workspace path is like 'src/app.py'"
        )
    assert isinstance(rel, str)
    return rel


def _not_plain(rel: object) -> str:
    if not isinstance(rel, str):
        return "it is not text"
    if not rel:
        return "it is empty"
    if "\x00" in rel:
        return "it holds a NUL byte"
    if rel.startswith(("/", "\\")):
        return "it is absolute"
    for part in rel.replace("\\", "/").split("/"):
        if not part:
            return "it has an empty component"
        if part in (".", ".."):
            return f"it has a {part!r} component"
    return ""


def check_manifest(manifest: object, where: str) -> None:
    """Refuse a manifest unless it maps plain relative paths to SHA-256 hex digests.

    ``where`` says whose manifest it is (an archive, a snapshot), for the message.
    The digests name blob files, so they are checked as strictly as the paths.
    """
    if not isinstance(manifest, dict):
        raise PathEscape(f"{where}: its workspace manifest is not a map of paths to hashes")
    for rel, digest in sorted(manifest.items(), key=lambda kv: str(kv[0])):
        try:
            check_relative(rel)
        except PathEscape as exc:
            raise PathEscape(f"{where}: {exc}") from None
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise PathEscape(
                f"{where}: the content of {rel!r} is named {str(digest)[:80]!r}, which is not "
                "a SHA-256 digest (64 lowercase hex digits)"
            )
