"""Files inside a workspace, reached without following a link at any step.

The host-side file tools (``read_file``, ``write_file``, ``list_files``) and
the workspace scan work on a folder that sandboxed commands write to. Checking
a path first (resolving its links) and opening it afterwards leaves a window
in which a command's process can swap a folder for a link to a host folder,
so the open lands outside. Here every step is taken from an open folder
descriptor with ``O_NOFOLLOW``: a link met anywhere on the way is refused
rather than followed, and a folder swapped after it was opened is still the
folder that was opened. (Linux's ``openat2`` with ``RESOLVE_BENEATH`` does
the same in one call, but Python does not expose it.)

Paths are relative, with ``/``; ``..`` and absolute paths are refused before
anything is opened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import PathEscape

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def parts_of(rel: str) -> list[str]:
    """The components of a workspace path; refuse one that could leave it.

    ``"."`` and ``""`` name the workspace itself (no components).
    """
    if not isinstance(rel, str) or "\x00" in rel or rel.startswith("/"):
        raise PathEscape(f"path {rel!r} must be relative to the workspace, e.g. 'src/app.py'")
    norm = posixpath.normpath(rel) if rel else "."
    if norm == ".." or norm.startswith("../"):
        raise PathEscape(f"path {rel!r} leads outside the agent's workspace; use a path inside it")
    return [] if norm == "." else norm.split("/")


def _link_refused(rel: str) -> PathEscape:
    return PathEscape(
        f"path {rel!r} goes through a symbolic link; the file tools follow no links "
        "(use the path the link points to, inside the workspace)"
    )


@contextlib.contextmanager
def open_dir(root: Path, parts: list[str], rel: str, *, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder ``root/parts``, each step taken without following links.

    With ``create``, missing folders are made on the way.
    """
    # the workspace folder itself is the host's choice and may be reached
    # through a link (a symlinked data folder, /tmp on macOS); below it, no link
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            try:
                step = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                step = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _link_refused(rel) from None
                if exc.errno == errno.ENOTDIR:
                    _refuse_if_link(fd, part, rel)
                raise
            os.close(fd)
            fd = step
        yield fd
    finally:
        os.close(fd)


def _refuse_if_link(dir_fd: int, name: str, rel: str) -> None:
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
            raise _link_refused(rel)


def _split(rel: str) -> tuple[list[str], str]:
    parts = parts_of(rel)
    if not parts:
        raise IsADirectoryError(f"{rel!r} is the workspace itself, not a file")
    return parts[:-1], parts[-1]


def read_bytes(root: Path, rel: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``rel`` under ``root``."""
    folders, name = _split(rel)
    with open_dir(root, folders, rel) as dir_fd:
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _link_refused(rel) from None
            raise
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise FileNotFoundError(f"{rel!r} is not a regular file")
        return fh.read(limit)


def write_atomic(
    root: Path, rel: str, data: bytes, tmp_suffix: str, before: Callable[[], None] | None = None
) -> None:
    """Replace the file ``rel`` under ``root`` with ``data`` in one rename.

    ``before`` is called just before the rename; if it raises, nothing is replaced.
    """
    folders, name = _split(rel)
    with open_dir(root, folders, rel, create=True) as dir_fd:
        tmp = f".{name}.{tmp_suffix}.tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dir_fd,
        )
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            if before is not None:
                before()
            try:
                mode = os.lstat(name, dir_fd=dir_fd).st_mode
            except FileNotFoundError:
                mode = stat.S_IFREG
            if stat.S_ISLNK(mode):  # replacing it would hide the mistake
                raise _link_refused(rel)
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(f"{rel!r} is a folder; choose a file path")
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise


def walk_files(root: Path, rel: str = ".") -> Iterator[tuple[str, int, str]]:
    """Every regular file under the folder ``rel``: (its path, its folder's fd, its name).

    Links are never followed (folders are walked by descriptor); a file or
    folder that vanishes or changes type during the walk is passed over. The
    descriptor is valid only until the next item.
    """
    parts = parts_of(rel)
    with open_dir(root, parts, rel) as top:
        prefix = "/".join(parts)
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=top):
            dirnames.sort()
            here = posixpath.normpath(posixpath.join(prefix, dirpath)) if prefix else dirpath
            for name in sorted(filenames):
                try:
                    mode = os.lstat(name, dir_fd=dir_fd).st_mode
                except OSError:
                    continue
                if stat.S_ISREG(mode):
                    yield posixpath.normpath(posixpath.join(here, name)), dir_fd, name
