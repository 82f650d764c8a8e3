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
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WorkspaceFull
from ..ports import Blobs
from . import beneath
from .paths import check_manifest, check_relative, resolve_inside

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


class Workspace:
    """An agent's folder, its manifest, and the blobs behind it."""

    def __init__(self, root: str | Path, blobs: Blobs) -> None:
        self.root = Path(root)
        self.blobs = blobs
        # (size, mtime_ns, ctime_ns, inode) -> hash, so unchanged files are not re-read
        self._seen: dict[str, tuple[tuple[int, int, int, int], str]] = {}
        self.size = 0
        """The bytes of the files the last :meth:`scan` found."""

    def create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def resolve(self, rel: str) -> Path:
        """The absolute path of ``rel`` inside the workspace; refuse escapes."""
        return resolve_inside(self.root, rel)

    def scan(self, limit: int | None = None, keep: bool = True) -> Manifest:
        """The manifest of the folder as it is now; new content goes to the blob store.

        With ``limit``, a folder whose files add up to more bytes raises
        :class:`~stead.errors.WorkspaceFull` as soon as the walk sees it, before
        the content past the limit is stored. Without ``keep``, nothing new is
        stored (a restore only compares).
        """
        manifest: Manifest = {}
        if not self.root.exists():
            return manifest
        # A file modified within the timestamp granularity of the scan could change
        # again without its stat changing; such "racily clean" files are re-hashed.
        trust_before = time.time_ns() - RACY_NS
        size = 0
        # walked by descriptor, following no link: a command still running in
        # the sandbox may swap a folder for a link to a host folder mid-scan,
        # and a file may vanish or change type between listing and reading
        for rel, dir_fd, name in beneath.walk_files(self.root):
            try:
                st = os.lstat(name, dir_fd=dir_fd)
            except OSError:
                continue
            if limit is not None and size + st.st_size > limit:
                raise WorkspaceFull(
                    f"the workspace holds more than its quota of {limit // 2**20} MiB "
                    f"(at {rel!r}); remove files, or raise limits.workspace_mb in the spec"
                )
            key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            seen = self._seen.get(rel)
            if seen is not None and seen[0] == key and st.st_mtime_ns < trust_before:
                manifest[rel] = seen[1]
                size += st.st_size
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fd)
                if not _is_regular(st.st_mode):
                    continue
                key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                data = fh.read()
            digest = hashlib.sha256(data).hexdigest()
            stored = self.blobs.has(digest)
            if keep and not stored:
                self.blobs.put(data, digest)
            if keep or stored:  # a hash remembered is a hash whose blob exists
                self._seen[rel] = (key, digest)
            manifest[rel] = digest
            size += len(data)
        self.size = size
        return manifest

    def restore(self, manifest: Manifest) -> Delta:
        """Make the folder equal ``manifest``; return what had to change.

        Only regular files and folders belong in a workspace: symbolic links and
        special files are removed first, so nothing is ever written through a
        link that a dying step left pointing out of the workspace. The manifest
        may come from an archive or an edited store: unless every path in it is
        a plain relative path (and every hash a SHA-256), it is refused whole
        with :class:`~stead.errors.PathEscape` before anything is touched.
        """
        check_manifest(manifest, f"the manifest restored into {self.root}")
        self.create()
        oddities = self._remove_non_regular()
        current = self.scan(keep=False)  # what is not in manifest is about to go
        delta = diff(manifest, current)
        # delta is "what current has that manifest lacks", so undo it
        for rel in delta.changed:
            if rel not in manifest:
                (self.root / rel).unlink()
                self._seen.pop(rel, None)
        for rel, digest in manifest.items():
            if current.get(rel) == digest:
                continue
            path = self._make_room(rel)
            tmp = path.with_name(f".{path.name}.stead-restore")
            tmp.write_bytes(self.blobs.get(digest))  # checked against its hash
            os.replace(tmp, path)
            self._remember(rel, path, digest)
        if delta or oddities:
            _prune_empty_dirs(self.root)
        if oddities:
            delta = Delta({**delta.changed, **dict.fromkeys(oddities, "")}, delta.removed)
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
        shutil.rmtree(self.root, ignore_errors=True)
        os.replace(staging.root, self.root)
        self._seen = dict(staging._seen)

    def _remove_non_regular(self) -> list[str]:
        """Delete symlinks and special files anywhere in the workspace; name them."""
        removed: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in [*dirnames, *filenames]:
                full = os.path.join(dirpath, name)
                mode = os.lstat(full).st_mode
                if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                    continue
                os.unlink(full)
                removed.append(os.path.relpath(full, self.root).replace(os.sep, "/"))
            # os.walk does not descend into symlinked folders, which were just removed
            dirnames[:] = [d for d in dirnames if os.path.isdir(os.path.join(dirpath, d))]
        return removed

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
        """Copy a folder's files into the (empty) workspace."""
        self.create()
        shutil.copytree(folder, self.root, dirs_exist_ok=True, symlinks=False)


def diff(old: Manifest, new: Manifest) -> Delta:
    """The delta that turns ``old`` into ``new``."""
    changed = {p: h for p, h in new.items() if old.get(p) != h}
    removed = sorted(p for p in old if p not in new)
    return Delta(changed, removed)


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _prune_empty_dirs(root: Path) -> None:
    # bottom-up, and looking again at each folder, so emptied parents go too
    for dirpath, _dirnames, _filenames in os.walk(root, topdown=False):
        if Path(dirpath) != root and not os.listdir(dirpath):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)
