"""A content-addressed blob store on disk.

A blob's name is the SHA-256 of its bytes, stored at ``ab/cdef…`` under the
root. Writes go to a temporary file that is fsynced and renamed into place, so a
blob either exists whole or not at all, and it is durable before any manifest
that names it is committed. Reads check the hash, so a damaged blob is reported,
never returned.

Content is stored as a zstandard frame when that is smaller, as it is for text
and code, and as-is otherwise (already compressed data). Reading tells them
apart by the frame's magic number and settles any doubt with the hash, so
blobs written before compression existed read as they always did.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path

import zstandard

from ..errors import IntegrityError, NotFound

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LEVEL = 3
"""zstandard's default: over a gigabyte a second here, and stores text at a fraction."""


class BlobStore:
    """Immutable byte strings by hash, in a folder that several workers may share."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return self._path(digest).exists()

    def stored_size(self, digest: str) -> int:
        """How many bytes of disk the blob takes (compressed, if it is)."""
        return self._path(digest).stat().st_size

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store ``data`` and return its hash (``digest`` if the caller knows it)."""
        digest = digest or hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if path.exists():
            return digest
        packed = zstandard.ZstdCompressor(level=_LEVEL).compress(data)
        if len(packed) >= len(data):
            packed = data
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
        with contextlib.suppress(FileNotFoundError):
            self._path(digest).unlink()

    def get(self, digest: str) -> bytes:
        """The bytes named by ``digest``, checked against it."""
        try:
            data = self._path(digest).read_bytes()
        except FileNotFoundError:
            raise NotFound(
                f"blob {digest} is not in the blob store at {self.root}; "
                "the store and the blob folder do not belong together"
            ) from None
        if data.startswith(_ZSTD_MAGIC):
            try:
                content = zstandard.ZstdDecompressor().decompress(data)
            except zstandard.ZstdError:
                content = None
            if content is not None and hashlib.sha256(content).hexdigest() == digest:
                return content
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(
                f"blob {digest} at {self._path(digest)} is damaged: its "
                "content no longer matches its hash"
            )
        return data
