"""The transactional workspace: one folder per agent, tracked by manifest.

A manifest maps each file's path (relative, with ``/``) to the SHA-256 of its
content. After every committed tool call and step the runtime commits the
manifest's delta with it and stores new content in the blob store, so the last
committed manifest always describes a workspace that can be rebuilt exactly.

On resume, :meth:`Workspace.restore` compares the folder with the last committed
manifest and puts back whatever a step that died half-way changed: files
rewritten, created or deleted since the commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import storefiles
from ..errors import PathEscape, WorkspaceFull
from ..ports import Blobs
from . import beneath
from .paths import (
    MAX_DEPTH,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    check_manifest,
    check_relative,
    path_problem,
    resolve_inside,
    shown,
)

Manifest = dict[str, str]

RACY_NS = 2_000_000_000
"""A file modified this recently is re-hashed at every scan, whatever its stat says."""
RESTORED_AGE_NS = 3_000_000_000
"""How far in the past a file written from a blob is dated (see :meth:`Workspace.restore`)."""


@dataclass(frozen=True, slots=True)
class Delta:
    """How one manifest differs from another."""

    changed: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed or self.removed)

    def paths(self) -> list[str]:
        return sorted([*self.changed, *self.removed])


@dataclass(frozen=True, slots=True)
class Quota:
    """What one call may leave in a workspace: bytes (``limits.workspace_mb``) and
    entries, files and folders alike (``limits.workspace_files``)."""

    max_bytes: int
    max_files: int | None = None


_SET_ID = stat.S_ISUID | stat.S_ISGID
"""Mode bits no workspace file keeps: the scan clears them (modes are no part of
a manifest, and a restore never writes them)."""


class Workspace:
    """An agent's folder, its manifest, and the blobs behind it."""

    def __init__(self, root: str | Path, blobs: Blobs) -> None:
        self.root = Path(root)
        self.blobs = blobs
        # (size, mtime_ns, ctime_ns, inode) -> hash, so unchanged files are not re-read
        self._seen: dict[str, tuple[tuple[int, int, int, int], str]] = {}
        self._store_files: frozenset[tuple[int, int]] = frozenset()
        self.size = 0
        """The bytes of the files the last :meth:`scan` found."""
        self.refused: list[str] = []
        """What the last :meth:`scan` found and left out of its manifest, because no
        workspace path names it (:func:`~stead.sandbox.paths.check_relative`), as
        journalable text."""

    def create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def resolve(self, rel: str) -> Path:
        """The absolute path of ``rel`` inside the workspace; refuse escapes."""
        return resolve_inside(self.root, rel)

    def scan(self, quota: Quota | None = None, keep: bool = True) -> Manifest:
        """The manifest of the folder as it is now; new content goes to the blob store.

        A file whose path breaks the one rule for workspace paths
        (:func:`~stead.sandbox.paths.check_relative`: ``..\\x``, a name that is not
        UTF-8, too long or too deep), or a folder too deep or unreadable to look
        into, is never put in a manifest, since every restore would refuse it.

        With a ``quota``, the scan is the check after a call: the first such
        file raises :class:`~stead.errors.PathEscape`, and a folder past the
        quota raises :class:`~stead.errors.WorkspaceFull` as soon as the walk
        sees it (more bytes than allowed, before the content past them is
        stored; more files and folders than allowed, before the rest is even
        listed). So one scan costs at most the quota, whatever a command left.
        Without a ``quota``, such files are left out and named in
        :attr:`refused`. Without ``keep``, nothing new is stored (the scan only
        compares).
        """
        manifest: Manifest = {}
        self.refused = []
        if not self.root.exists():
            return manifest
        self._store_files = storefiles.held_files()  # a hard link to them is never opened
        # A file modified within the timestamp granularity of the scan could change
        # again without its stat changing; such "racily clean" files are re-hashed.
        trust_before = time.time_ns() - RACY_NS
        size = 0
        entries = 0
        # walked by descriptor, following no link: a command still running in
        # the sandbox may swap a folder for a link to a host folder mid-scan,
        # and a file may vanish or change type between listing and reading
        # after a call, what a command shut with chmod is opened to be seen
        for e in beneath.walk(self.root, open_up=0 if quota is None else beneath.LOOK):
            entries += 1
            if quota is not None and quota.max_files is not None and entries > quota.max_files:
                raise WorkspaceFull(
                    f"the workspace holds more than {quota.max_files} files and folders "
                    f"(at {shown(e.rel)!r}); remove files, or raise limits.workspace_files "
                    "in the spec"
                )
            if e.kind == "other" or (e.kind == "folder" and not e.sealed):
                continue  # links and special files are no part of a manifest
            why = _sealed(e.rel) if e.kind == "folder" else path_problem(e.rel)
            if why:
                if quota is not None:
                    raise PathEscape(
                        f"the workspace holds {shown(e.rel)!r}, which no workspace path can "
                        f"name ({why}); name files in plain UTF-8, each name at most "
                        f"{MAX_NAME_BYTES} bytes, each path at most {MAX_PATH_BYTES} bytes and "
                        f"{MAX_DEPTH} levels, with no '.' or '..' between '/' or '\\'"
                    )
                self.refused.append(shown(e.rel))
                continue
            got = self._digest(e, trust_before, keep, quota, size)
            if got is None:
                continue
            digest, length = got
            manifest[e.rel] = digest
            size += length
        self.size = size
        return manifest

    def _digest(
        self, e: beneath.Entry, trust_before: int, keep: bool, quota: Quota | None, size: int
    ) -> tuple[str, int] | None:
        """The hash and length of the file ``e`` (its content stored unless not
        ``keep``), or None if it vanished; past ``quota`` with the ``size`` bytes
        seen before it, :class:`~stead.errors.WorkspaceFull`."""
        try:
            st = os.lstat(e.name, dir_fd=e.dir_fd)
        except OSError:
            return None
        if (st.st_dev, st.st_ino) in self._store_files:
            return None  # a link to the live store: never opened (stead.storefiles)
        if quota is not None and st.st_size > quota.max_bytes - size:
            raise _over(e.rel, quota)
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        seen = self._seen.get(e.rel)
        if seen is not None and seen[0] == key and st.st_mtime_ns < trust_before:
            return seen[1], st.st_size
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            try:
                fd = os.open(e.name, flags, dir_fd=e.dir_fd)
            except PermissionError:
                if quota is None:
                    raise
                beneath.open_up(e.dir_fd, e.name, beneath.LOOK)  # shut by a command
                fd = os.open(e.name, flags, dir_fd=e.dir_fd)
        except PermissionError:
            if quota is not None:
                raise PathEscape(
                    f"the workspace holds {shown(e.rel)!r}, which cannot be read to be kept; "
                    "leave files readable"
                ) from None
            return None
        except OSError:
            return None  # gone, or no longer a file, since it was listed
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if not _is_regular(st.st_mode):
                return None
            if st.st_mode & _SET_ID:
                # a worker run as root makes a command's files root's: one it made
                # set-uid would make anyone who can reach the workspace root
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_SET_ID)
            key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            # a file still growing is read no further than the quota allows
            data = fh.read() if quota is None else fh.read(quota.max_bytes - size + 1)
        if quota is not None and len(data) > quota.max_bytes - size:
            raise _over(e.rel, quota)
        digest = hashlib.sha256(data).hexdigest()
        stored = self.blobs.has(digest)
        if keep and not stored:
            self.blobs.put(data, digest)
        if keep or stored:  # a hash remembered is a hash whose blob exists
            self._seen[e.rel] = (key, digest)
        return digest, len(data)

    def restore(self, manifest: Manifest) -> Delta:
        """Make the folder equal ``manifest``; return what had to change.

        Only regular files and folders belong in a workspace: symbolic links and
        special files are removed first, so nothing is ever written through a
        link that a dying step left pointing out of the workspace, and so is
        every file the manifest lacks, whatever its name or depth (a folder
        nested too deep to walk goes whole). The manifest may come from an
        archive or an edited store: unless every path in it is a plain relative
        path (and every hash a SHA-256), it is refused whole with
        :class:`~stead.errors.PathEscape` before anything is touched. The paths
        of the delta are text that can be journaled (:func:`~stead.sandbox.paths.shown`),
        whatever bytes the names on disk were.
        """
        check_manifest(manifest, f"the manifest restored into {self.root}")
        self.create()
        trust_before = time.time_ns() - RACY_NS
        changed: dict[str, str] = {}  # on disk, not as the manifest has it
        kept: set[str] = set()  # on disk as the manifest has it
        folders: list[str] = []
        for e in beneath.walk(self.root, open_up=beneath.CHANGE):
            if e.kind == "folder":
                if e.sealed:
                    beneath.remove_tree(e.dir_fd, e.name)  # nothing in it can be kept
                    changed[shown(e.rel)] = ""
                else:
                    folders.append(e.rel)
                continue
            digest = None
            if e.kind == "file" and e.rel in manifest:
                got = self._digest(e, trust_before, False, None, 0)
                digest = None if got is None else got[0]
                if digest == manifest[e.rel]:
                    kept.add(e.rel)
                    continue
            if digest is None or e.rel not in manifest:
                # a link, a special file, or a file the manifest does not have
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(e.name, dir_fd=e.dir_fd)
                self._seen.pop(e.rel, None)
            changed[shown(e.rel)] = digest or ""
        for rel, digest in manifest.items():
            if rel in kept:
                continue
            path = self._make_room(rel)
            # a fixed-length name: the file's own may already be as long as a name can be
            tmp = path.with_name(f".stead-restore-{secrets.token_hex(8)}")
            tmp.write_bytes(self.blobs.get(digest))  # checked against its hash
            os.replace(tmp, path)
            self._remember(rel, path, digest)
        delta = Delta(changed, sorted(r for r in manifest if r not in kept and r not in changed))
        if delta:
            self._prune(folders)
        return delta

    def _remember(self, rel: str, path: Path, digest: str) -> None:
        """Record the hash of a file just written from its blob, so no scan re-reads it.

        The file is dated :data:`RESTORED_AGE_NS` in the past, out of the racy
        window: any later write gives it a new mtime (and ctime), so its stat
        no longer matches and the next scan hashes it again. Without this, a
        freshly restored workspace would be hashed in full by every scan for two
        seconds (on a 50 MB wake, the recovery and the first step's scans).
        """
        past = time.time_ns() - RESTORED_AGE_NS
        os.utime(path, ns=(past, past))
        st = os.lstat(path)
        self._seen[rel] = ((st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino), digest)

    def take_over(self, staging: Workspace) -> None:
        """Replace this folder with ``staging``'s (built aside), keeping what it knows.

        The files keep their inodes through the rename, so the hashes
        ``staging`` recorded while writing them still describe them.
        """
        beneath.remove_folder(self.root)  # whatever a command left in it, however deep
        os.replace(staging.root, self.root)
        self._seen = dict(staging._seen)

    def _prune(self, folders: list[str]) -> None:
        """Remove the folders of ``folders`` left empty, the deepest first."""
        for rel in sorted(folders, key=lambda r: r.count("/"), reverse=True):
            parts = rel.split("/")
            # refused unless it is empty; a folder swapped for a link is left alone
            with (
                contextlib.suppress(OSError, PathEscape),
                beneath.open_dir(self.root, parts[:-1], rel) as dir_fd,
            ):
                os.rmdir(parts[-1], dir_fd=dir_fd)

    def _make_room(self, rel: str) -> Path:
        """Ensure every parent of ``rel`` is a real folder and ``rel`` is not one."""
        check_relative(rel)  # checked again where it is written, whoever called
        path = self.root
        parts = rel.split("/")
        for part in parts[:-1]:
            path = path / part
            if path.exists() and not path.is_dir():
                path.unlink()  # a file where the manifest has a folder
            path.mkdir(exist_ok=True)
        path = path / parts[-1]
        if path.is_dir():
            shutil.rmtree(path)  # a folder where the manifest has a file
        return path

    def seed_from(self, folder: str | Path) -> None:
        """Copy a folder's files into the (empty) workspace; refuse, leaving it empty, a
        folder that holds a file of the store this process has open (a link to one
        too): opening it would drop the store's locks (see :mod:`stead.storefiles`)."""
        self.create()
        held = storefiles.held_files()

        def refuse_store(where: str, names: list[str]) -> list[str]:
            for name in names:  # before any file of this folder is opened
                path = os.path.join(where, name)
                storefiles.refuse_held(path, "the workspace's seed holds", held)
            return []

        try:
            if held:
                storefiles.refuse_held(folder, "the workspace's seed", held)
            shutil.copytree(folder, self.root, dirs_exist_ok=True, symlinks=False,
                            ignore=refuse_store if held else None)  # fmt: skip
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise


def diff(old: Manifest, new: Manifest) -> Delta:
    """The delta that turns ``old`` into ``new``."""
    changed = {p: h for p, h in new.items() if old.get(p) != h}
    removed = sorted(p for p in old if p not in new)
    return Delta(changed, removed)


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _over(rel: str, quota: Quota) -> WorkspaceFull:
    return WorkspaceFull(
        f"the workspace holds more than its quota of {quota.max_bytes // 2**20} MiB "
        f"(at {shown(rel)!r}); remove files, or raise limits.workspace_mb in the spec"
    )


def _sealed(rel: str) -> str:
    """Why the folder ``rel``, which a walk could not enter, holds nothing a manifest can."""
    if rel.count("/") + 1 >= MAX_DEPTH:
        return f"what it holds is more than {MAX_DEPTH} levels deep"
    return "it cannot be opened, so what it holds cannot be kept"
