"""A content-addressed blob store on disk, and the rules every blob store keeps.

A blob's name is the SHA-256 of its bytes, stored at ``ab/cdef…`` under the
root. Writes go to a temporary file that is fsynced and renamed into place, so a
blob either exists whole or not at all, and it is durable before any manifest
that names it is committed. Reads check the hash, so a damaged blob is reported,
never returned.

Content is stored as a zstandard frame when that is smaller, as it is for text
and code, and as-is otherwise (already compressed data). Reading tells them
apart by the frame's magic number and settles any doubt with the hash, so
blobs written before compression existed read as they always did.

The other backends (:mod:`stead.store.postgres_blobs`,
:mod:`stead.store.s3_blobs`) store exactly these bytes and read them through
:func:`pack` and :func:`unpack`, so a blob reads the same wherever it is kept,
and every one of them refuses a name that is not a SHA-256 digest
(:func:`check_digest`): a name is joined to the tenant to make a path, a key or
a row, and ``../other-tenant/…`` must never be one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import zstandard

from ..errors import IntegrityError, NotFound, UsageError

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LEVEL = 3
"""zstandard's default: over a gigabyte a second here, and stores text at a fraction."""
_SHA256 = re.compile(r"[0-9a-f]{64}")

ELSEWHERE = (
    "if the agent last ran on another host, its blobs are in the blob store that host "
    "used: give every host the same shared blob store with --blobs URL (or $STEAD_BLOBS: "
    "postgresql://…?schema=NAME or s3://BUCKET/PREFIX)"
)
"""What to do about a blob that is not here, said by every backend's NotFound."""


def is_digest(digest: str) -> bool:
    return isinstance(digest, str) and _SHA256.fullmatch(digest) is not None


def check_digest(digest: str, for_put: bool = False) -> str:
    """``digest`` if it can name a blob (64 lowercase hex digits), else refused."""
    if is_digest(digest):
        return digest
    shown = repr(digest)[:80]
    if for_put:
        raise UsageError(f"cannot store a blob as {shown}: a blob is named by its SHA-256 digest")
    raise NotFound(f"no blob is named {shown}: a blob's name is a SHA-256 digest (64 hex digits)")


def pack(data: bytes) -> bytes:
    """The bytes to store for ``data``: a zstandard frame if that is smaller, else ``data``."""
    packed = zstandard.ZstdCompressor(level=_LEVEL).compress(data)
    return data if len(packed) >= len(data) else packed


def unpack(stored: bytes, digest: str, where: str) -> bytes:
    """The content of ``stored``, checked against ``digest``; IntegrityError if damaged."""
    if stored.startswith(_ZSTD_MAGIC):
        try:
            content = zstandard.ZstdDecompressor().decompress(stored)
        except zstandard.ZstdError:
            content = None
        if content is not None and hashlib.sha256(content).hexdigest() == digest:
            return content
    if hashlib.sha256(stored).hexdigest() != digest:
        raise IntegrityError(
            f"blob {digest} at {where} is damaged: its content no longer matches its hash"
        )
    return stored


class BlobStore:
    """Immutable byte strings by hash, in a folder that several workers may share."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, digest: str) -> Path:
        check_digest(digest)
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return is_digest(digest) and self._path(digest).exists()

    def stored_size(self, digest: str) -> int:
        """How many bytes of disk the blob takes (compressed, if it is)."""
        try:
            return self._path(digest).stat().st_size
        except FileNotFoundError:
            raise NotFound(self._missing(digest)) from None

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store ``data`` and return its hash (``digest`` if the caller knows it)."""
        digest = check_digest(digest, for_put=True) if digest else hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if path.exists():
            # stored again: new to whoever writes it now, so a collection spares it
            with contextlib.suppress(FileNotFoundError):
                os.utime(path)
                return digest
        packed = pack(data)
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(packed)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return digest

    def forget(self, digest: str) -> None:
        """Delete the blob, if it is stored (a write undone before anything names it)."""
        if not is_digest(digest):
            return  # names no blob: nothing to delete
        with contextlib.suppress(FileNotFoundError):
            self._path(digest).unlink()

    def stored(self) -> Iterator[tuple[str, float]]:
        """Every blob here, with when it was last stored (for a collection)."""
        for folder in sorted(self.root.glob("[0-9a-f][0-9a-f]")):
            for path in sorted(folder.iterdir()):
                digest = folder.name + path.name
                if is_digest(digest):
                    with contextlib.suppress(FileNotFoundError):
                        yield digest, path.stat().st_mtime

    def forget_if_older(self, digest: str, cutoff: float) -> int:
        """Delete the blob if it was last stored before ``cutoff``; its stored bytes
        if it was deleted, else 0."""
        path = self._path(digest)
        try:
            found = path.stat()
            if found.st_mtime >= cutoff:
                return 0
            path.unlink()
        except FileNotFoundError:
            return 0
        return found.st_size

    def get(self, digest: str) -> bytes:
        """The bytes named by ``digest``, checked against it."""
        try:
            data = self._path(digest).read_bytes()
        except FileNotFoundError:
            raise NotFound(self._missing(digest)) from None
        return unpack(data, digest, str(self._path(digest)))

    def _missing(self, digest: str) -> str:
        return f"blob {digest} is not in the local blob folder {self.root}; {ELSEWHERE}"
