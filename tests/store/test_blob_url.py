"""Blob store URLs: which backend each names, and the ones refused before any use."""

from __future__ import annotations

from pathlib import Path

import pytest

from stead.errors import UsageError
from stead.store.blob_url import LocalBlobs, open_blobs
from stead.store.postgres_blobs import PostgresBlobs
from stead.store.s3_blobs import S3Blobs


def test_no_url_is_the_folder_beside_the_data(tmp_path: Path) -> None:
    backend = open_blobs(None, tmp_path / "data" / "blobs")
    assert isinstance(backend, LocalBlobs) and backend.root == tmp_path / "data" / "blobs"
    digest = backend.tenant("default").put(b"x")
    assert (tmp_path / "data" / "blobs" / "default" / digest[:2] / digest[2:]).exists()


@pytest.mark.parametrize("form", ["file://{}", "file://localhost{}", "{}"])
def test_a_file_url_or_a_plain_path_is_that_folder(tmp_path: Path, form: str) -> None:
    backend = open_blobs(form.format(tmp_path / "shared"), tmp_path / "unused")
    assert isinstance(backend, LocalBlobs) and backend.root == tmp_path / "shared"


def test_a_postgres_url_connects_only_when_a_blob_is_used() -> None:
    backend = open_blobs("postgresql://nobody@127.0.0.1:1/none?schema=blobs_x", "/unused")
    assert isinstance(backend, PostgresBlobs)
    assert backend.where == "postgresql://127.0.0.1:1/none?schema=blobs_x"
    backend.close()


def test_an_s3_url_names_bucket_prefix_and_endpoint() -> None:
    backend = open_blobs("s3://my-bucket/a/b/?endpoint_url=http://127.0.0.1:9000", "/unused")
    assert isinstance(backend, S3Blobs)
    assert (backend.bucket, backend.prefix) == ("my-bucket", "a/b")
    assert backend.where == "s3://my-bucket/a/b at http://127.0.0.1:9000"
    assert backend.key("t1", "ab" + "c" * 62) == "a/b/t1/ab/" + "c" * 62
    bare = open_blobs("s3://my-bucket", "/unused")
    assert isinstance(bare, S3Blobs) and bare.key("t1", "ab" + "c" * 62) == "t1/ab/" + "c" * 62


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://host/blobs", "unknown blob store URL"),
        ("file://otherhost/blobs", "names no local folder"),
        ("s3://", "names no bucket"),
        ("s3://Bad_Bucket/x", "names no bucket"),
        ("s3://bucket/x?secret_key=abc", "never from the URL"),
        ("s3://bucket/x?endpoint_url=127.0.0.1:9000", "endpoint_url=http"),
        ("postgresql://h/db?schema=Bad-Name", "not a plain schema name"),
    ],
)
def test_a_url_that_cannot_be_used_is_refused_at_once(url: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        open_blobs(url, "/unused")
