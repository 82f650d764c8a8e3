"""Blobs in S3-compatible object storage: one object per tenant and digest.

For deployments whose workers run on many hosts: object storage is where
content every host must read is cheapest to keep, and any S3-compatible
service will do (AWS S3, MinIO, Ceph, R2, …; the tests use moto's server)::

    s3://BUCKET[/PREFIX][?endpoint_url=URL][&region=NAME]

A blob is the object ``PREFIX/TENANT/ab/cdef…``, holding the bytes a blob
folder would (:func:`stead.store.blobs.pack`). The bucket must exist (stead
never makes one: where buckets live and who may read them is the operator's
call). Credentials come from where every AWS client finds them: the
``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` variables, ``~/.aws``,
or the host's role; never from the URL, so that no secret is in a command
line or a log.

A write is one whole-object PUT, which S3 makes visible all at once or not
at all, and which has returned only when the object is stored durably: so a
blob is never seen half written, and it is stored before the manifest that
names it is committed. A blob already there is not sent again (a HEAD
first), and writing the same content twice from two hosts leaves the same
object. Reads check the SHA-256, as every backend does.

With an ``endpoint_url`` (a service other than AWS), buckets are addressed by
path (``http://HOST/BUCKET/KEY``), which every such service understands.
"""

from __future__ import annotations

import hashlib
import re
import threading
import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import botocore.config
import botocore.exceptions

from ..errors import NotFound, SteadError, StoreUnusable, UsageError
from ..ids import check_id
from .blobs import ELSEWHERE, check_digest, is_digest, pack, unpack

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_MISSING = ("404", "NoSuchKey", "NotFound")


class S3Blobs:
    """Every tenant's blobs under one bucket and prefix, through one client."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.bucket = parts.netloc
        if not _BUCKET.fullmatch(self.bucket):
            raise UsageError(
                f"the blob URL {url!r} names no bucket; use s3://BUCKET/PREFIX (a bucket "
                "name is 3 to 63 lowercase letters, digits, '.' and '-')"
            )
        self.prefix = parts.path.strip("/")
        self.endpoint_url: str | None = None
        self.region: str | None = None
        for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
            if key == "endpoint_url" and value.startswith(("http://", "https://")):
                self.endpoint_url = value
            elif key == "region" and value:
                self.region = value
            else:
                raise UsageError(
                    f"the blob URL's parameter {key}={value!r} cannot be used; an s3:// URL "
                    "takes endpoint_url=http(s)://HOST:PORT and region=NAME (credentials come "
                    "from the AWS environment variables or files, never from the URL)"
                )
        self.where = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        if self.endpoint_url is not None:
            self.where += f" at {self.endpoint_url}"
        self._client: S3Client | None = None
        self._lock = threading.Lock()

    def tenants(self) -> list[str]:
        prefix = self.key("", "").rstrip("/")
        prefix = f"{prefix}/" if prefix else ""
        pages = self.client().get_paginator("list_objects_v2")
        found: list[str] = []
        try:
            for page in pages.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
                shared = page.get("CommonPrefixes", [])
                found += [p["Prefix"][len(prefix) :].strip("/") for p in shared]
        except _ERRORS as exc:
            raise self.failed(exc) from exc
        return sorted(found)

    def tenant(self, tenant: str) -> TenantBlobs:
        return TenantBlobs(self, check_id(tenant, "tenant"))

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def client(self) -> S3Client:
        """The client, made when the first blob is used (a client is safe across threads)."""
        with self._lock:
            if self._client is None:
                aws = self.endpoint_url is None
                config = botocore.config.Config(
                    connect_timeout=10,
                    read_timeout=60,
                    retries={"mode": "standard", "max_attempts": 4},
                    s3={"addressing_style": "auto" if aws else "path"},
                    # the CRC checksums boto3 adds to every request by default are refused
                    # by some S3-compatible services; every read checks the SHA-256 anyway
                    request_checksum_calculation="when_supported" if aws else "when_required",
                    response_checksum_validation="when_supported" if aws else "when_required",
                )
                session = boto3.session.Session()  # a session of its own: not thread-safe
                self._client = session.client(
                    "s3", endpoint_url=self.endpoint_url, region_name=self.region, config=config
                )
            return self._client

    def key(self, tenant: str, digest: str) -> str:
        return "/".join(p for p in (self.prefix, tenant, digest[:2], digest[2:]) if p)

    def failed(self, exc: Exception) -> SteadError:
        """What an error of the service or of the connection means to a caller."""
        if isinstance(exc, botocore.exceptions.ClientError):
            error: Any = exc.response.get("Error", {})
            code, message = error.get("Code", "?"), error.get("Message", "")
            if code == "NoSuchBucket":
                return StoreUnusable(
                    f"the bucket of the blob store {self.where} does not exist; create it "
                    "(stead never makes buckets), or correct --blobs"
                )
            return StoreUnusable(
                f"the blob store {self.where} refused a request ({code}: {message}); check "
                "its credentials (the AWS environment variables or files) and --blobs"
            )
        return StoreUnusable(
            f"the blob store {self.where} cannot be used: {exc}; check that it runs and can "
            "be reached, and its credentials (the AWS environment variables or files)"
        )


def _missing_code(exc: Exception) -> bool:
    if not isinstance(exc, botocore.exceptions.ClientError):
        return False
    error: Any = exc.response.get("Error", {})
    return error.get("Code") in _MISSING


_ERRORS = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)


class TenantBlobs:
    """One tenant's blobs: the tenant is a segment of every key."""

    def __init__(self, backend: S3Blobs, tenant: str) -> None:
        self._backend = backend
        self.tenant = tenant

    def _key(self, digest: str) -> str:
        return self._backend.key(self.tenant, check_digest(digest))

    def _head(self, digest: str) -> int | None:
        """The stored object's size, or None if there is none."""
        try:
            head = self._backend.client().head_object(
                Bucket=self._backend.bucket, Key=self._key(digest)
            )
        except _ERRORS as exc:
            if _missing_code(exc):
                return None
            raise self._backend.failed(exc) from exc
        return int(head["ContentLength"])

    def has(self, digest: str) -> bool:
        return is_digest(digest) and self._head(digest) is not None

    def stored_size(self, digest: str) -> int:
        size = self._head(digest)
        if size is None:
            raise NotFound(self._missing(digest))
        return size

    def put(self, data: bytes, digest: str | None = None) -> str:
        digest = check_digest(digest, for_put=True) if digest else hashlib.sha256(data).hexdigest()
        if self._head(digest) is not None:
            self._touch(digest)  # new to whoever writes it now: a collection spares it
            return digest
        try:
            self._backend.client().put_object(
                Bucket=self._backend.bucket, Key=self._key(digest), Body=pack(data)
            )
        except _ERRORS as exc:
            raise self._backend.failed(exc) from exc
        return digest

    def _touch(self, digest: str) -> None:
        key = self._key(digest)
        try:
            self._backend.client().copy_object(
                Bucket=self._backend.bucket, Key=key, MetadataDirective="REPLACE",
                CopySource={"Bucket": self._backend.bucket, "Key": key},
                Metadata={"stored": "again"},
            )  # fmt: skip
        except _ERRORS as exc:
            raise self._backend.failed(exc) from exc

    def stored(self) -> Iterator[tuple[str, float]]:
        prefix = self._backend.key(self.tenant, "") + "/"
        pages = self._backend.client().get_paginator("list_objects_v2")
        try:
            for page in pages.paginate(Bucket=self._backend.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    digest = item["Key"][len(prefix) :].replace("/", "")
                    if is_digest(digest):
                        yield digest, item["LastModified"].timestamp()
        except _ERRORS as exc:
            raise self._backend.failed(exc) from exc

    def forget_if_older(self, digest: str, cutoff: float) -> int:
        key = self._key(digest)
        client = self._backend.client()
        try:
            head = client.head_object(Bucket=self._backend.bucket, Key=key)
            if head["LastModified"].timestamp() >= cutoff:
                return 0
            client.delete_object(Bucket=self._backend.bucket, Key=key)
        except _ERRORS as exc:
            if _missing_code(exc):
                return 0
            raise self._backend.failed(exc) from exc
        return int(head["ContentLength"])

    def get(self, digest: str) -> bytes:
        key = self._key(digest)
        try:
            found = self._backend.client().get_object(Bucket=self._backend.bucket, Key=key)
            stored = found["Body"].read()
        except _ERRORS as exc:
            if _missing_code(exc):
                raise NotFound(self._missing(digest)) from None
            raise self._backend.failed(exc) from exc
        return unpack(stored, digest, f"s3://{self._backend.bucket}/{key}")

    def forget(self, digest: str) -> None:
        if is_digest(digest):
            try:
                self._backend.client().delete_object(
                    Bucket=self._backend.bucket, Key=self._key(digest)
                )
            except _ERRORS as exc:
                raise self._backend.failed(exc) from exc

    def _missing(self, digest: str) -> str:
        return (
            f"blob {digest} is not in the blob store {self._backend.where} (tenant "
            f"{self.tenant}); {ELSEWHERE}"
        )
