"""A content-addressed blob store on disk.

A blob's name is the SHA-256 of its bytes, stored at ``ab/cdef…`` under the
root. Writes go to a temporary file that is fsynced and renamed into place, so a
blob either exists whole or not at all, and it is durable before any manifest
that names it is committed. Reads check the hash, so a damaged blob is reported,
never returned.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from ..errors import IntegrityError, NotFound


class BlobStore:
    """Immutable byte strings by hash, in a folder that several workers may share."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return self._path(digest).exists()

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store ``data`` and return its hash (``digest`` if the caller knows it)."""
        digest = digest or hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if path.exists():
            return digest
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return digest

    def get(self, digest: str) -> bytes:
        """The bytes named by ``digest``, checked against it."""
        try:
            data = self._path(digest).read_bytes()
        except FileNotFoundError:
            raise NotFound(
                f"blob {digest} is not in the blob store at {self.root}; "
                "the store and the blob folder do not belong together"
            ) from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(
                f"blob {digest} at {self._path(digest)} is damaged: its "
                "content no longer matches its hash"
            )
        return data
