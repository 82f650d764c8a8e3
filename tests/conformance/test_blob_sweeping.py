"""What a collection (``stead gc``) needs of every blob backend: the tenants it holds,
each tenant's blobs with when each was last stored, storing again renewing that,
and a delete that spares a blob stored since the cutoff."""

from __future__ import annotations

import time

from tests.conformance.test_blob_conformance import Under, under  # noqa: F401 (the fixture)

from stead.store.collect import collect
from stead.store.memory import MemoryStore


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
