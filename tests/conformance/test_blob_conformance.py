"""The blob store conformance suite: every backend keeps the same promises.

Each test runs once per backend: the local folder (in ``tmp_path``),
PostgreSQL (a fresh schema, tests/postgres.py) and S3 (a bucket of its own on
the session's ``moto_server``, tests/s3.py). To add a backend, add one entry
to ``BACKENDS``: its URL for a fresh, empty store, and two ways around it to
what it stores (to damage a blob, to count a tenant's blobs), since a damaged
blob can only be made by going behind the backend's back.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql
from tests import postgres, s3

from stead.errors import IntegrityError, NotFound, UsageError
from stead.store.blob_url import BlobBackend, open_blobs
from stead.store.collect import collect
from stead.store.memory import MemoryStore

Damage = Callable[[bytes], bytes]


@dataclass
class Under:
    """A blob backend under test, and the ways around it to the bytes it stores."""

    backend: BlobBackend
    url: str
    damage: Callable[[str, str, Damage], None]
    """Rewrite the stored bytes of (tenant, digest) with a function of them."""
    count: Callable[[str], int]
    """How many blobs the tenant has stored."""


@contextmanager
def local(request: pytest.FixtureRequest, tmp: Path) -> Iterator[Under]:
    root = tmp / "shared-blobs"

    def damage(tenant: str, digest: str, change: Damage) -> None:
        path = root / tenant / digest[:2] / digest[2:]
        path.write_bytes(change(path.read_bytes()))

    def count(tenant: str) -> int:
        return sum(1 for p in (root / tenant).rglob("*") if p.is_file())

    url = f"file://{root}"
    yield Under(open_blobs(url, tmp / "unused"), url, damage, count)


@contextmanager
def in_postgres(request: pytest.FixtureRequest, tmp: Path) -> Iterator[Under]:
    with postgres.fresh_schema() as schema, postgres.connect() as raw:
        table = sql.Identifier(schema, "blobs")

        def damage(tenant: str, digest: str, change: Damage) -> None:
            where = sql.SQL("WHERE tenant = %s AND digest = %s")
            row = raw.execute(
                sql.SQL("SELECT data FROM {} ").format(table) + where, (tenant, digest)
            ).fetchone()
            assert row is not None
            stored = change(bytes(row[0]))  # type: ignore[arg-type]
            raw.execute(
                sql.SQL("UPDATE {} SET data = %s ").format(table) + where, (stored, tenant, digest)
            )

        def count(tenant: str) -> int:
            query = sql.SQL("SELECT COUNT(*) FROM {} WHERE tenant = %s").format(table)
            row = raw.execute(query, (tenant,)).fetchone()
            return int(row[0]) if row else 0  # type: ignore[call-overload]

        url = postgres.url_for(schema)
        yield Under(open_blobs(url, tmp / "unused"), url, damage, count)


@contextmanager
def in_s3(request: pytest.FixtureRequest, tmp: Path) -> Iterator[Under]:
    endpoint = request.getfixturevalue("s3_endpoint")  # started only for this backend
    with s3.fresh_bucket(endpoint) as bucket:
        client = s3.client(endpoint)

        def damage(tenant: str, digest: str, change: Damage) -> None:
            key = f"blobs/{tenant}/{digest[:2]}/{digest[2:]}"
            stored = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            client.put_object(Bucket=bucket, Key=key, Body=change(stored))

        def count(tenant: str) -> int:
            listed = client.list_objects_v2(Bucket=bucket, Prefix=f"blobs/{tenant}/")
            return len(listed.get("Contents", []))

        url = s3.url_for(bucket, endpoint)
        yield Under(open_blobs(url, tmp / "unused"), url, damage, count)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], AbstractContextManager[Under]]] = {
    "local": local,
    "postgres": in_postgres,
    "s3": in_s3,
}


@pytest.fixture(params=list(BACKENDS))
def under(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Under]:
    with BACKENDS[request.param](request, tmp_path) as u:
        try:
            yield u
        finally:
            u.backend.close()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


CODE = b"def step(state):\n    return fold(state, event)\n" * 400


# -- round trips ---------------------------------------------------------------------


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=5000) | st.text(max_size=3000).map(str.encode))
def test_any_bytes_come_back_as_they_went_in(under: Under, data: bytes) -> None:
    blobs = under.backend.tenant("t1")
    digest = blobs.put(data)
    assert digest == sha(data)
    assert blobs.has(digest)
    assert blobs.get(digest) == data


def test_text_is_stored_compressed_and_reads_back_whole(under: Under) -> None:
    blobs = under.backend.tenant("t1")
    digest = blobs.put(CODE)
    assert blobs.stored_size(digest) < len(CODE) // 10
    assert blobs.get(digest) == CODE
    noise = random.Random(1).randbytes(4096)  # incompressible: stored as it is
    assert blobs.stored_size(blobs.put(noise)) == len(noise)


def test_a_large_blob_round_trips(under: Under) -> None:
    blobs = under.backend.tenant("t1")
    big = random.Random(20).randbytes(10 * 2**20) + CODE * 600  # 20 MB: half noise, half text
    assert len(big) > 20 * 10**6
    digest = blobs.put(big)
    assert blobs.has(digest)
    assert blobs.get(digest) == big


def test_another_host_naming_the_same_url_reads_the_same_blobs(
    under: Under, tmp_path: Path
) -> None:
    digest = under.backend.tenant("t1").put(b"written on host a")
    other = open_blobs(under.url, tmp_path / "host-b-default")
    try:
        assert other.tenant("t1").get(digest) == b"written on host a"
    finally:
        other.close()


def test_a_closed_backend_opens_again_when_used(under: Under) -> None:
    digest = under.backend.tenant("t1").put(b"before close")
    under.backend.close()
    assert under.backend.tenant("t1").get(digest) == b"before close"


# -- idempotence ---------------------------------------------------------------------


def test_putting_the_same_content_again_keeps_one_blob(under: Under) -> None:
    blobs = under.backend.tenant("t1")
    first = blobs.put(CODE)
    size = blobs.stored_size(first)
    assert blobs.put(CODE) == first
    assert blobs.put(CODE, first) == first  # a caller that knows the digest
    assert under.count("t1") == 1
    assert blobs.stored_size(first) == size
    assert blobs.get(first) == CODE


def test_workers_putting_the_same_content_at_once_store_it_once(under: Under) -> None:
    blobs = under.backend.tenant("t1")
    got: list[str | BaseException] = []

    def put() -> None:
        try:
            got.append(blobs.put(CODE))
        except BaseException as exc:
            got.append(exc)

    threads = [threading.Thread(target=put) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [sha(CODE)] * 6
    assert under.count("t1") == 1
    assert blobs.get(sha(CODE)) == CODE


# -- missing, forgotten, misnamed ---------------------------------------------------------


def test_a_missing_blob_is_not_found_and_says_where_blobs_may_be(under: Under) -> None:
    blobs = under.backend.tenant("t1")
    digest = sha(b"never stored")
    assert not blobs.has(digest)
    with pytest.raises(NotFound, match=digest) as info:
        blobs.get(digest)
    assert "--blobs" in str(info.value)
    with pytest.raises(NotFound, match=digest):
        blobs.stored_size(digest)


def test_a_forgotten_blob_is_gone_and_forgetting_again_is_harmless(under: Under) -> None:
    blobs = under.backend.tenant("t1")
    digest = blobs.put(b"undone")
    blobs.forget(digest)
    assert not blobs.has(digest)
    with pytest.raises(NotFound):
        blobs.get(digest)
    blobs.forget(digest)
    assert under.count("t1") == 0


@pytest.mark.parametrize(
    "name",
    ["../t2/" + "a" * 58, "A" * 64, "a" * 63, "a" * 65, "ab/" + "c" * 61, "a" * 63 + "/"],
)
def test_a_name_that_is_not_a_sha256_names_nothing(under: Under, name: str) -> None:
    blobs = under.backend.tenant("t1")
    assert not blobs.has(name)
    with pytest.raises(NotFound, match=r"not a SHA-256|no blob"):
        blobs.get(name)
    with pytest.raises(UsageError, match="SHA-256"):
        blobs.put(b"smuggled", name)
    blobs.forget(name)  # nothing to do, and nothing done


@pytest.mark.parametrize("tenant", ["", "..", "../t2", "t1/../t2", "a" * 65])
def test_a_tenant_that_is_not_an_id_is_refused(under: Under, tenant: str) -> None:
    with pytest.raises(UsageError, match="tenant"):
        under.backend.tenant(tenant)


# -- damage ------------------------------------------------------------------------------


def flip(stored: bytes) -> bytes:
    damaged = bytearray(stored)
    damaged[len(damaged) // 2] ^= 0x01
    return bytes(damaged)


@pytest.mark.parametrize(
    "how",
    [flip, lambda b: b[: len(b) // 2], lambda b: b"", lambda b: CODE + b"#"],
    ids=["flipped-bit", "truncated", "emptied", "swapped"],
)
@pytest.mark.parametrize("content", [CODE, random.Random(3).randbytes(3000)], ids=["text", "noise"])
def test_a_damaged_blob_is_reported_never_returned(
    under: Under, how: Damage, content: bytes
) -> None:
    blobs = under.backend.tenant("t1")
    digest = blobs.put(content)
    under.damage("t1", digest, how)
    with pytest.raises(IntegrityError, match=f"blob {digest} .*damaged"):
        blobs.get(digest)


# -- tenants ------------------------------------------------------------------------------


def test_a_tenant_never_reaches_another_tenants_blob(under: Under) -> None:
    mine, theirs = under.backend.tenant("t1"), under.backend.tenant("t2")
    digest = mine.put(b"t1's secret plan")
    assert not theirs.has(digest)
    with pytest.raises(NotFound, match=digest):
        theirs.get(digest)
    with pytest.raises(NotFound):
        theirs.stored_size(digest)
    theirs.forget(digest)  # forgets nothing of t1's
    assert mine.get(digest) == b"t1's secret plan"


def test_the_same_content_in_two_tenants_is_two_blobs(under: Under) -> None:
    mine, theirs = under.backend.tenant("t1"), under.backend.tenant("t2")
    digest = mine.put(b"shared text")
    assert theirs.put(b"shared text") == digest
    assert under.count("t1") == under.count("t2") == 1
    mine.forget(digest)
    assert not mine.has(digest)
    assert theirs.get(digest) == b"shared text"
    under.damage("t2", digest, flip)
    mine.put(b"shared text")
    assert mine.get(digest) == b"shared text"  # t2's damage is t2's alone


# -- what a collection (stead gc) needs of every backend ------------------------------


def test_a_backend_lists_its_tenants_and_their_blobs_with_when_stored(under: Under) -> None:
    acme, globex = under.backend.tenant("acme"), under.backend.tenant("globex")
    before = time.time() - 5
    one, two = acme.put(b"one"), acme.put(b"two")
    other = globex.put(b"one")
    assert set(under.backend.tenants()) == {"acme", "globex"}
    stored = dict(acme.stored())  # type: ignore[attr-defined]
    assert set(stored) == {one, two}
    assert all(before <= at <= time.time() + 5 for at in stored.values())
    assert dict(globex.stored()).keys() == {other}  # type: ignore[attr-defined]


def test_a_delete_spares_a_blob_stored_since_the_cutoff(under: Under) -> None:
    blobs = under.backend.tenant("acme")
    digest = blobs.put(b"content")
    # a cutoff before it was stored: spared
    assert blobs.forget_if_older(digest, time.time() - 60) == 0  # type: ignore[attr-defined]
    assert blobs.has(digest)
    # one after: deleted, its stored bytes told
    assert blobs.forget_if_older(digest, time.time() + 60) > 0  # type: ignore[attr-defined]
    assert not blobs.has(digest)
    assert blobs.forget_if_older(digest, time.time() + 60) == 0  # type: ignore[attr-defined]


def test_storing_a_blob_again_renews_when_it_was_stored(under: Under) -> None:
    blobs = under.backend.tenant("acme")
    digest = blobs.put(b"content")
    [(_, first)] = list(blobs.stored())  # type: ignore[attr-defined]
    time.sleep(1.1)  # the clocks these backends keep count whole seconds at worst
    blobs.put(b"content")
    [(_, again)] = list(blobs.stored())  # type: ignore[attr-defined]
    assert again > first
    assert blobs.forget_if_older(digest, first + 0.5) == 0  # type: ignore[attr-defined]


def test_a_collection_deletes_only_what_no_agent_names(under: Under) -> None:
    blobs = under.backend.tenant("acme")
    loose = blobs.put(b"nobody names this")
    # no agents: everything is loose, but a grace spares what was stored just now
    assert collect(MemoryStore(), under.backend, time.time()).blobs == 0
    done = collect(MemoryStore(), under.backend, time.time() + 10, grace=1, dry_run=True)
    assert done.blobs == 1 and blobs.has(loose)
    done = collect(MemoryStore(), under.backend, time.time() + 10, grace=1)
    assert done.blobs == 1 and done.bytes > 0 and not blobs.has(loose)
