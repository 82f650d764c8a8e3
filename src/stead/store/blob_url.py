"""Blob stores chosen by URL, beside the journal store.

A workspace is a folder on one worker, but what it is rebuilt from (the blobs
its manifests name) must reach whichever worker runs the agent next: after a
crash, or when a hibernated agent wakes on another host. So the blobs live in
a store of their own, named by a URL as the journal store is (``--blobs URL``,
``$STEAD_BLOBS``, ``Runtime(blobs=URL)``):

* none, ``file:///PATH`` or a plain path: a folder on this host
  (:class:`~stead.store.blobs.BlobStore`), by default ``DATA_DIR/blobs``. For
  one host, or for hosts that share a network file system.
* ``postgresql://…?schema=NAME`` (the form of :mod:`stead.store.postgres_url`):
  rows of a ``blobs`` table in that schema (:mod:`stead.store.postgres_blobs`),
  which may well be the journal store's own. For small deployments: nothing
  more to run than the database every worker already reaches.
* ``s3://BUCKET/PREFIX[?endpoint_url=URL][&region=NAME]``: objects in
  S3-compatible object storage (:mod:`stead.store.s3_blobs`), credentials
  from the standard AWS environment variables and files.

Each backend is one object per runtime (:class:`BlobBackend`), holding what is
costly to make (a connection pool, a client) and made only when a blob is
first used, so a command that reads no blob opens no connection for them. Its
:meth:`~BlobBackend.tenant` gives one tenant's :class:`~stead.ports.Blobs`:
the tenant is part of every path, key and row, so no tenant can name another's
content. Every backend stores the same bytes (zstandard when smaller), checks
the SHA-256 on every read, raises :class:`~stead.errors.NotFound` for a blob
it does not have and :class:`~stead.errors.IntegrityError` for a damaged one;
``tests/conformance/test_blob_conformance.py`` holds all three to that.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Protocol

from ..errors import UsageError
from ..extras import need
from ..ids import check_id
from ..ports import Blobs
from .blobs import BlobStore

__all__ = ["FORMS", "BlobBackend", "Blobs", "LocalBlobs", "open_blobs"]

FORMS = "file:///PATH, postgresql://HOST/DATABASE?schema=NAME or s3://BUCKET/PREFIX"


class BlobBackend(Protocol):
    """Where a runtime's blobs are kept: every tenant's, each seen alone."""

    where: str
    """The store's location without credentials, for messages."""

    def tenant(self, tenant: str) -> Blobs:
        """One tenant's blobs; no digest reaches another tenant's."""

    def tenants(self) -> list[str]:
        """Every tenant with blobs here (for a collection: :mod:`stead.store.collect`)."""

    def close(self) -> None:
        """Let go of connections (the backend may be used again: it reopens them)."""


class LocalBlobs:
    """A folder on this host, one subfolder (a :class:`BlobStore`) per tenant."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def tenant(self, tenant: str) -> Blobs:
        return BlobStore(self.root / check_id(tenant, "tenant"))

    def tenants(self) -> list[str]:
        """The tenants with a folder here (for a collection)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def close(self) -> None:
        pass  # nothing is held open between calls


def open_blobs(url: str | None, default_root: str | Path) -> BlobBackend:
    """The blob store ``url`` names; None means the folder ``default_root``.

    Only the URL is checked here; a database or a bucket is reached when the
    first blob is read or written.
    """
    if url is None or not url.strip():
        return LocalBlobs(default_root)
    if url.startswith(("postgresql://", "postgres://")):
        need("psycopg", "postgres", "a PostgreSQL blob store")
        from .postgres_blobs import PostgresBlobs

        return PostgresBlobs(url)
    if url.startswith("s3://"):
        need("boto3", "s3", "an S3 blob store")
        from .s3_blobs import S3Blobs

        return S3Blobs(url)
    if url.startswith("file:"):
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in ("", "localhost") or not parts.path:
            raise UsageError(
                f"the blob URL {url!r} names no local folder; use file:///ABSOLUTE/PATH "
                "(three slashes) or a plain path"
            )
        return LocalBlobs(urllib.parse.unquote(parts.path))
    if "://" in url:
        raise UsageError(f"unknown blob store URL {url!r}; use {FORMS}, or a plain path")
    return LocalBlobs(url)
