"""Confining paths to a workspace, and the one rule for what a workspace path is.

:func:`check_relative` is that rule. Every path a manifest names passes it:
the scan applies it to every file a call leaves (a file it refuses fails that
call, :mod:`stead.runtime.limits`), and every restore applies it again to what
it reads from a snapshot, an archive or the store before writing anything
(hibernate, wake, fork, import, recovery, rollback). So no manifest can name a
file that a later restore would refuse, which would leave the agent unable to
run, sleep or move again.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import PathEscape

_SHA256 = re.compile(r"[0-9a-f]{64}")

MAX_PATH_BYTES = 1024
"""The longest workspace path, in UTF-8 bytes: a restore writes it below the
workspace's own folder, and the two together must stay within the host's
PATH_MAX (4096 on Linux, 1024 on macOS)."""
MAX_NAME_BYTES = 255
"""The longest name of one file or folder (the kernel's NAME_MAX)."""
MAX_DEPTH = 64
"""The most names a workspace path has: a scan holds one folder descriptor per
level, so this bounds what one scan can hold open."""


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
    inside a name (``a\\b``) is an ordinary character on Linux and passes. It is
    UTF-8 text, at most :data:`MAX_PATH_BYTES` long, :data:`MAX_DEPTH` names deep,
    each name at most :data:`MAX_NAME_BYTES`. Pure: it looks at the text only,
    never at the disk.

    A name on disk that is not UTF-8 reaches Python with its stray bytes as
    lone surrogates (``os.fsdecode``), which this refuses rather than encodes:
    manifests, journal events and archives are UTF-8 JSON that every hash is
    taken over and PostgreSQL stores as text, so such a name cannot be
    journaled as it is; and an escaped form (``\\xff``) would be a second
    spelling of a name a command can also write literally, so two files could
    claim one manifest entry. Refusing costs a command only the use of names
    no tool of an agent's could pass back as a path anyway.
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
    try:
        size = len(rel.encode("utf-8"))
    except UnicodeEncodeError:
        return "its name is not UTF-8 text"
    for part in rel.replace("\\", "/").split("/"):
        if not part:
            return "it has an empty component"
        if part in (".", ".."):
            return f"it has a {part!r} component"
    if size > MAX_PATH_BYTES:
        return f"it is longer than {MAX_PATH_BYTES} bytes"
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH:
        return f"it is more than {MAX_DEPTH} levels deep"
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):
        return f"a name in it is longer than {MAX_NAME_BYTES} bytes"
    return ""


def path_problem(rel: object) -> str:
    """Why ``rel`` is not a workspace path (:func:`check_relative`), or ``""``."""
    return _not_plain(rel)


def shown(rel: str) -> str:
    """``rel`` as text that can be journaled: bytes of a name that are not UTF-8
    (lone surrogates, as ``os.fsdecode`` gives them) written as ``\\xNN``."""
    try:
        raw = rel.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name gives (from JSON, say)
        raw = rel.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "backslashreplace")


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
