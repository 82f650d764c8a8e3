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
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import PathEscape
from .paths import MAX_DEPTH

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_REMOVE_ROUNDS = 100
LOOK = 0o500
"""The owner's bits a folder needs to be listed and looked into (read, search)."""
CHANGE = 0o700
"""The owner's bits a folder needs for what it holds to be removed or added (and write)."""
"""How often :func:`remove_tree` lists a folder again that filled up meanwhile
(a process still writing into it) before it gives up."""


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


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing a walk found: where it is, and what it is.

    ``rel`` is built from the names as the kernel gave them, so it may be no
    workspace path at all (``..\\x``, bytes that are not UTF-8): the caller
    judges it. ``dir_fd`` is the descriptor of its folder, valid only until the
    walk moves on.
    """

    rel: str
    dir_fd: int
    name: str
    kind: str
    """``"file"`` (regular), ``"folder"``, or ``"other"`` (a link, a device, a socket)."""
    sealed: bool = False
    """A folder the walk did not enter though it may hold something: it is as deep
    as a workspace path may go (``max_depth``), or it could not be opened."""


def walk(
    root: Path,
    rel: str = ".",
    *,
    max_depth: int = MAX_DEPTH,
    ordered: bool = False,
    open_up: int = 0,
) -> Iterator[Entry]:
    """Every entry under the folder ``rel``, folders before what they hold.

    Folders are entered by descriptor without following links, so nothing
    outside ``root`` is ever listed; an entry that vanishes or changes type
    meanwhile is passed over. Nothing is read ahead: a caller that stops
    early (a scan past its quota of files) has cost only what it took, and at
    most ``max_depth`` folder descriptors are open at once however deep a
    command nested its folders. With ``ordered``, each folder's entries come
    sorted by name (slower on a large folder, which is listed whole first).

    With ``open_up`` (:data:`LOOK` or :data:`CHANGE`), every folder entered is
    given those of its owner's bits it lacks (:func:`open_up`) before it is
    listed, so what a command shut with ``chmod`` is seen, or removed, all
    the same.
    """
    parts = parts_of(rel)
    if open_up and not parts:
        # the workspace folder itself is the host's (a mount point in the
        # sandbox, never swapped for a link), so it is changed by its path
        mode = os.stat(root).st_mode
        if mode & open_up != open_up:
            os.chmod(root, stat.S_IMODE(mode) | open_up)
    with open_dir(root, parts, rel) as top:
        yield from _walk_from(top, "/".join(parts), len(parts), max_depth, ordered, open_up)


def _walk_from(
    top: int, prefix: str, depth: int, max_depth: int, ordered: bool, opening: int
) -> Iterator[Entry]:
    # the folders being walked, outermost first: (fd, path, depth, subfolders
    # left to enter); every fd but top's is this walk's own, closed however it ends
    frames: list[tuple[int, str, int, list[str]]] = [(top, prefix, depth, [])]
    try:
        while frames:
            fd, here, level, pending = frames[-1]
            if opening:
                _own(fd, opening)
            for name, kind in _listing(fd, ordered):
                rel = f"{here}/{name}" if here else name
                sealed = False
                if kind == "folder":
                    if level + 1 < max_depth:
                        pending.append(name)
                    else:
                        sealed = _holds_anything(fd, name, opening)
                yield Entry(rel, fd, name, kind, sealed)
            pending.reverse()  # taken from the end: in the order they were listed
            while frames:
                parent, there, deep, left = frames[-1]
                if not left:
                    frames.pop()
                    if parent != top:
                        os.close(parent)
                    continue
                name = left.pop()
                rel = f"{there}/{name}" if there else name
                try:
                    child = _open_folder(parent, name, opening)
                except (FileNotFoundError, NotADirectoryError):
                    continue  # gone, or no longer a folder, since it was listed
                except OSError as exc:
                    if exc.errno != errno.ELOOP:  # a link now: not followed
                        yield Entry(rel, parent, name, "folder", True)
                    continue
                frames.append((child, rel, deep + 1, []))
                break
    finally:
        for fd, *_ in frames:
            if fd != top:
                os.close(fd)


def _listing(fd: int, ordered: bool) -> Iterator[tuple[str, str]]:
    """(name, kind) of every entry of the open folder ``fd``."""
    with os.scandir(fd) as it:
        found = ((e.name, _kind(e)) for e in it)
        if ordered:
            yield from sorted(found)
        else:
            yield from found


def _kind(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_dir(follow_symlinks=False):
            return "folder"
        if entry.is_file(follow_symlinks=False):
            return "file"
    except OSError:
        pass
    return "other"


def _holds_anything(dir_fd: int, name: str, opening: int) -> bool:
    try:
        fd = _open_folder(dir_fd, name, opening)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True  # it cannot be looked into: it may hold anything
    try:
        with os.scandir(fd) as it:
            return next(iter(it), None) is not None
    finally:
        os.close(fd)


def _open_folder(dir_fd: int, name: str, opening: int) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        if not opening:
            raise
    open_up(dir_fd, name, opening)
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def open_up(dir_fd: int, name: str, bits: int) -> None:
    """Give ``name`` (a file or folder of ``dir_fd``) the owner's ``bits`` it lacks
    (:data:`LOOK` or :data:`CHANGE`; a file only their read and write); a link
    is never followed, nor changed.

    A command runs as the worker's own user, so it can shut a file or folder
    to that user (``chmod 000``). Modes are no part of a manifest (a restore
    writes files with its own), so the host opens such a file up rather than
    lose sight of it, or fail to remove it. The mode is changed through a
    descriptor opened with ``O_PATH | O_NOFOLLOW``, which needs no permission
    on the file and never leads through a link.
    """
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            return
        wanted = bits if stat.S_ISDIR(mode) else bits & 0o600
        # /proc/self/fd/N leads to the file itself, not to a path that could change
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(mode) | wanted)
    finally:
        os.close(fd)


def _own(fd: int, bits: int) -> None:
    """Give the open folder ``fd`` the owner's ``bits`` it lacks."""
    mode = os.fstat(fd).st_mode
    if mode & bits != bits:
        os.fchmod(fd, stat.S_IMODE(mode) | bits)


def walk_files(root: Path, rel: str = ".") -> Iterator[tuple[str, int, str]]:
    """Every regular file under the folder ``rel``: (its path, its folder's fd, its name).

    In order, folder by folder (see :func:`walk`). The descriptor is valid
    only until the next item.
    """
    for e in walk(root, rel, ordered=True):
        if e.kind == "file":
            yield e.rel, e.dir_fd, e.name


def remove_tree(dir_fd: int, name: str) -> None:
    """Remove the folder ``name`` of ``dir_fd`` and all it holds, following no link.

    A command can nest folders thousands deep, past what a path or one
    descriptor per level can reach, so this never descends: each subfolder met
    is moved up beside ``name`` under a fresh name and removed in its turn.
    Every folder is opened from ``dir_fd``, so at most two descriptors are open.
    """
    pending = [name]
    rounds = 0
    while pending:
        current = pending.pop()
        try:
            fd = _open_folder(dir_fd, current, CHANGE)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            with contextlib.suppress(FileNotFoundError):
                os.unlink(current, dir_fd=dir_fd)  # a link or a file by now: not entered
            continue
        try:
            _own(fd, CHANGE)  # a command may have shut it: what it holds must go
            with os.scandir(fd) as it:
                for e in it:
                    with contextlib.suppress(FileNotFoundError):  # gone meanwhile
                        if e.is_dir(follow_symlinks=False):
                            moved = f".stead-gone-{secrets.token_hex(8)}"
                            try:
                                os.rename(e.name, moved, src_dir_fd=fd, dst_dir_fd=dir_fd)
                            except PermissionError:  # a folder moves only if it is writable
                                open_up(fd, e.name, CHANGE)
                                os.rename(e.name, moved, src_dir_fd=fd, dst_dir_fd=dir_fd)
                            pending.append(moved)
                        else:
                            os.unlink(e.name, dir_fd=fd)
        finally:
            os.close(fd)
        try:
            os.rmdir(current, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            rounds += 1
            if exc.errno != errno.ENOTEMPTY or rounds > _REMOVE_ROUNDS:
                raise
            pending.append(current)  # something was added meanwhile: go round again


def remove_folder(path: Path) -> None:
    """Remove the folder ``path`` and all it holds (:func:`remove_tree`); nothing if
    it is not there."""
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        remove_tree(parent, path.name)
    finally:
        os.close(parent)
