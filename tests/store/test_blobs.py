"""The content-addressed blob store."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from stead.errors import IntegrityError, NotFound
from stead.store.blobs import BlobStore


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


@pytest.mark.parametrize("data", [b"", b"hello", bytes(range(256)) * 300, "ünï\n".encode()])
def test_put_then_get_round_trips(blobs: BlobStore, data: bytes) -> None:
    digest = blobs.put(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert blobs.has(digest)
    assert blobs.get(digest) == data


def test_blobs_are_stored_under_their_hash(blobs: BlobStore) -> None:
    digest = blobs.put(b"content")
    path = blobs.root / digest[:2] / digest[2:]
    assert path.read_bytes() == b"content"
    assert not list(path.parent.glob(".*.tmp")), "no temporary file may be left behind"


def test_putting_the_same_content_twice_keeps_one_blob(blobs: BlobStore) -> None:
    first = blobs.put(b"same")
    second = blobs.put(b"same")
    assert first == second
    assert [p for p in blobs.root.rglob("*") if p.is_file()] == [blobs.root / first[:2] / first[2:]]


def test_a_second_store_on_the_same_folder_sees_the_blob(tmp_path: Path) -> None:
    digest = BlobStore(tmp_path / "shared").put(b"shared")
    assert BlobStore(tmp_path / "shared").get(digest) == b"shared"


def test_a_damaged_blob_raises_integrity_error(blobs: BlobStore) -> None:
    digest = blobs.put(b"precious bytes")
    path = blobs.root / digest[:2] / digest[2:]
    damaged = bytearray(path.read_bytes())
    damaged[3] ^= 0x01
    path.write_bytes(bytes(damaged))
    with pytest.raises(IntegrityError, match=digest):
        blobs.get(digest)


def test_a_truncated_blob_raises_integrity_error(blobs: BlobStore) -> None:
    digest = blobs.put(b"precious bytes")
    (blobs.root / digest[:2] / digest[2:]).write_bytes(b"")
    with pytest.raises(IntegrityError):
        blobs.get(digest)


def test_a_missing_blob_raises_not_found(blobs: BlobStore) -> None:
    digest = hashlib.sha256(b"never stored").hexdigest()
    assert not blobs.has(digest)
    with pytest.raises(NotFound, match=digest):
        blobs.get(digest)
