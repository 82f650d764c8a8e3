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

from ..store.blobs import BlobStore
from .paths import resolve_inside

Manifest = dict[str, str]


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

    def __init__(self, root: str | Path, blobs: BlobStore) -> None:
        self.root = Path(root)
        self.blobs = blobs
        # (size, mtime_ns, ctime_ns, inode) -> hash, so unchanged files are not re-read
        self._seen: dict[str, tuple[tuple[int, int, int, int], str]] = {}

    def create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def resolve(self, rel: str) -> Path:
        """The absolute path of ``rel`` inside the workspace; refuse escapes."""
        return resolve_inside(self.root, rel)

    def scan(self) -> Manifest:
        """The manifest of the folder as it is now; new content goes to the blob store."""
        manifest: Manifest = {}
        if not self.root.exists():
            return manifest
        root = str(self.root)
        # A file modified within the timestamp granularity of the scan could change
        # again without its stat changing; such "racily clean" files are re-hashed.
        trust_before = time.time_ns() - 2_000_000_000
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                st = os.lstat(full)
                if not _is_regular(st.st_mode):
                    continue
                key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                seen = self._seen.get(rel)
                if seen is not None and seen[0] == key and st.st_mtime_ns < trust_before:
                    manifest[rel] = seen[1]
                    continue
                with open(full, "rb") as fh:
                    data = fh.read()
                digest = hashlib.sha256(data).hexdigest()
                if not self.blobs.has(digest):
                    self.blobs.put(data, digest)
                self._seen[rel] = (key, digest)
                manifest[rel] = digest
        return manifest

    def restore(self, manifest: Manifest) -> Delta:
        """Make the folder equal ``manifest``; return what had to change."""
        self.create()
        current = self.scan()
        delta = diff(manifest, current)
        # delta is "what current has that manifest lacks", so undo it
        for rel in delta.changed:
            path = self.root / rel
            if rel in manifest:
                continue
            path.unlink()
            self._seen.pop(rel, None)
        for rel, digest in manifest.items():
            if current.get(rel) == digest:
                continue
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.stead-restore")
            tmp.write_bytes(self.blobs.get(digest))
            os.replace(tmp, path)
            self._seen.pop(rel, None)
        if delta:
            _prune_empty_dirs(self.root)
        return delta

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
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        if Path(dirpath) != root and not dirnames and not filenames:
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)
