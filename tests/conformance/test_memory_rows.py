"""Memory rows and their search, the same on every backend (``stead.store.memory_rows``).

Rows are read and written for one tenant; an owner's ``changed`` count rises at
every write, so a search cache sees any change; a forgotten memory is gone from
every read and its id is never reused; search is exact.
"""

from __future__ import annotations

import pytest

from stead.errors import UsageError
from stead.memories.book import Book
from stead.memories.embedders import HashEmbedder
from stead.memories.search import ExactIndex
from stead.memories.vectors import pack
from stead.store.base import Store
from stead.store.memory_rows import SHARED, MemoryRow, MemoryRows
from stead.testing import FakeClock


def rows(store: Store) -> MemoryRows:
    assert isinstance(store, MemoryRows)
    return store


def row(mid: str, tenant: str = "t1", owner: str = "ag_1", vector: list[float] | None = None,
        text: str = "a fact") -> MemoryRow:  # fmt: skip
    return MemoryRow(mid, tenant, owner, text, "model", "test:3", pack(vector or [1.0, 0.0, 0.0]),
                     {"call_id": "c1"}, "agent:ag_1", 10.0, 10.0)  # fmt: skip


def test_a_memory_reads_back_as_stored_and_only_in_its_tenant(store: Store) -> None:
    r = rows(store)
    r.put_memory(row("mem_1"))
    got = r.get_memory("t1", "mem_1")
    assert got is not None and got.changed == 1
    assert (got.text, got.source, got.provenance, got.vector) == (
        "a fact",
        "model",
        {"call_id": "c1"},
        pack([1.0, 0.0, 0.0]),
    )
    assert r.get_memory("t2", "mem_1") is None
    assert r.list_memories("t2", ["ag_1"]) == []
    assert [m.memory_id for m in r.list_memories("t1", ["ag_1"])] == ["mem_1"]
    assert r.list_memories("t1", ["ag_1"])[0].vector == b""  # asked without vectors


def test_owners_are_kept_apart_and_listed_together_when_asked(store: Store) -> None:
    r = rows(store)
    r.put_memory(row("mem_1"))
    r.put_memory(row("mem_2", owner=SHARED))
    r.put_memory(row("mem_3", owner="ag_2"))
    assert [m.memory_id for m in r.list_memories("t1", ["ag_1", SHARED])] == ["mem_1", "mem_2"]
    assert [m.memory_id for m in r.list_memories("t1", [])] == []


def test_every_write_raises_the_owners_stamp(store: Store) -> None:
    r = rows(store)
    assert r.memory_stamp("t1", "ag_1") == 0
    r.put_memory(row("mem_1"))
    r.put_memory(row("mem_2"))
    assert r.memory_stamp("t1", "ag_1") == 2
    r.put_memory(row("mem_1", text="corrected"))
    assert r.memory_stamp("t1", "ag_1") == 3
    r.forget_memory("t1", "mem_2", 20.0)
    assert r.memory_stamp("t1", "ag_1") == 4
    assert r.memory_stamp("t1", "ag_2") == r.memory_stamp("t2", "ag_1") == 0


def test_a_forgotten_memory_is_erased_and_its_id_never_reused(store: Store) -> None:
    r = rows(store)
    r.put_memory(row("mem_1", text="secret plan"))
    assert r.forget_memory("t2", "mem_1", 20.0) is None  # not that tenant's
    gone = r.forget_memory("t1", "mem_1", 20.0)
    assert gone is not None and gone.text == "secret plan"
    assert r.get_memory("t1", "mem_1") is None
    assert r.list_memories("t1", ["ag_1"]) == []
    assert r.forget_memory("t1", "mem_1", 21.0) is None
    with pytest.raises(ValueError, match="forgotten"):
        r.put_memory(row("mem_1"))


def test_an_id_of_another_tenant_or_owner_cannot_be_overwritten(store: Store) -> None:
    r = rows(store)
    r.put_memory(row("mem_1"))
    with pytest.raises(ValueError, match="not this owner"):
        r.put_memory(row("mem_1", tenant="t2"))
    with pytest.raises(ValueError, match="not this owner"):
        r.put_memory(row("mem_1", owner=SHARED))
    got = r.get_memory("t1", "mem_1")
    assert got is not None and got.owner == "ag_1"


def test_search_is_exact_and_sees_every_change(store: Store) -> None:
    r = rows(store)
    index = ExactIndex(r)
    r.put_memory(row("mem_1", vector=[1.0, 0.0, 0.0]))
    r.put_memory(row("mem_2", vector=[0.0, 1.0, 0.0]))
    r.put_memory(row("mem_3", vector=[0.6, 0.8, 0.0]))
    r.put_memory(row("mem_4", tenant="t2", vector=[0.0, 1.0, 0.0]))
    query = pack([0.0, 1.0, 0.0])
    found = index.search("t1", ["ag_1"], "test:3", query, 2)
    assert [f.row.memory_id for f in found] == ["mem_2", "mem_3"]
    assert found[0].score == pytest.approx(1.0) and found[1].score == pytest.approx(0.8)
    r.forget_memory("t1", "mem_2", 20.0)  # the cached matrix is stale now
    assert [f.row.memory_id for f in index.search("t1", ["ag_1"], "test:3", query, 2)] == [
        "mem_3", "mem_1"]  # fmt: skip
    assert index.search("t1", ["ag_1"], "other:3", query, 2) == []  # another vector space


def test_a_book_saves_recalls_corrects_and_forgets(store: Store) -> None:
    book = Book(rows(store), "t1", "ag_1", HashEmbedder(), FakeClock())
    book.save("the staging server is db-7", "model", by="agent:ag_1")
    book.save("invoices are due on the 5th", "model", by="agent:ag_1")
    (best, *_) = book.recall("which server is staging", 1)
    assert best.row.text == "the staging server is db-7"
    old, new = book.correct(best.row.memory_id, "the staging server is db-9", by="ann")
    assert (old.text, new.text, new.source) == (
        "the staging server is db-7",
        "the staging server is db-9",
        "person",
    )
    assert book.recall("which server is staging", 1)[0].row.text.endswith("db-9")
    book.forget(best.row.memory_id)
    assert [m.text for m in book.list()] == ["invoices are due on the 5th"]
    with pytest.raises(UsageError):
        book.save("x" * 5000, "model", by="agent:ag_1")


def test_rows_since_a_count_are_the_writes_after_it_in_order(store: Store) -> None:
    r = rows(store)
    r.put_memory(row("mem_1"))
    r.put_memory(row("mem_2"))
    r.put_memory(row("mem_1", text="again"))
    r.forget_memory("t1", "mem_2", 20.0)
    since = r.memories_since("t1", "ag_1", 1)
    assert [(m.memory_id, m.changed, m.forgotten) for m in since] == [
        ("mem_1", 3, False), ("mem_2", 4, True)]  # fmt: skip
    assert since[0].text == "again" and since[0].vector == pack([1.0, 0.0, 0.0])
    assert since[1].text == "" and since[1].vector == b""
    assert r.memories_since("t2", "ag_1", 0) == []


def test_concurrent_writers_get_distinct_counts(store: Store) -> None:
    import threading

    r = rows(store)
    threads = [threading.Thread(target=r.put_memory, args=(row(f"mem_{i}"),)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = sorted(m.changed for m in r.memories_since("t1", "ag_1", 0))
    assert counts == list(range(1, 9))


def test_a_search_sees_writes_made_through_another_index(store: Store) -> None:
    r = rows(store)
    first, second = ExactIndex(r), ExactIndex(r)  # two processes' caches, say
    query = pack([0.0, 1.0, 0.0])
    r.put_memory(row("mem_1", vector=[1.0, 0.0, 0.0]))
    assert [f.row.memory_id for f in first.search("t1", ["ag_1"], "test:3", query, 3)] == ["mem_1"]
    r.put_memory(row("mem_2", vector=[0.0, 1.0, 0.0]))
    r.put_memory(row("mem_1", vector=[0.0, 0.0, 1.0], text="moved"))
    second.search("t1", ["ag_1"], "test:3", query, 3)
    found = first.search("t1", ["ag_1"], "test:3", query, 3)
    assert [(f.row.memory_id, round(f.score, 3)) for f in found] == [("mem_2", 1.0), ("mem_1", 0.0)]
    assert found[1].row.text == "moved"
    r.forget_memory("t1", "mem_2", 30.0)
    assert [f.row.memory_id for f in first.search("t1", ["ag_1"], "test:3", query, 3)] == ["mem_1"]


@pytest.mark.parametrize("numpy", [True, False])
def test_search_agrees_with_and_without_numpy(
    store: Store, numpy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    from stead.memories import search

    monkeypatch.setattr(search, "HAVE_NUMPY", numpy and search.HAVE_NUMPY)
    rng = random.Random(5)
    r = rows(store)
    vectors = {f"mem_{i:03d}": [rng.gauss(0, 1) for _ in range(8)] for i in range(60)}
    for mid, v in vectors.items():
        r.put_memory(MemoryRow(mid, "t1", "ag_1", mid, "model", "e:8", pack(v)))
    query = [rng.gauss(0, 1) for _ in range(8)]
    found = ExactIndex(r).search("t1", ["ag_1"], "e:8", pack(query), 7)

    def cosine(v: list[float]) -> float:
        dot = sum(a * b for a, b in zip(v, query, strict=True))
        return dot / (sum(a * a for a in v) ** 0.5 * sum(b * b for b in query) ** 0.5)

    best = sorted(vectors, key=lambda m: -cosine(vectors[m]))[:7]
    assert [f.row.memory_id for f in found] == best


def test_deleting_an_agent_deletes_its_memories_and_no_one_else_s(store: Store) -> None:
    from tests.conformance.test_store_conformance import T0, create

    create(store, "ag_1")
    create(store, "ag_2")
    r = rows(store)
    r.put_memory(row("mem_1", owner="ag_1"))
    r.put_memory(row("mem_2", owner="ag_2"))
    r.put_memory(row("mem_3", owner=SHARED))
    store.delete_agent("ag_1", T0 + 1)
    assert r.list_memories("t1", ["ag_1"]) == []
    assert [m.memory_id for m in r.list_memories("t1", ["ag_2", SHARED])] == ["mem_2", "mem_3"]


def test_owners_past_the_bound_are_dropped_and_loaded_again(store: Store) -> None:
    r = rows(store)
    index = ExactIndex(r, most_bytes=2 * 12)  # two vectors of 3 float32s
    for owner in ("ag_1", "ag_2"):
        r.put_memory(row(f"mem_{owner}_a", owner=owner, vector=[1.0, 0.0, 0.0]))
        r.put_memory(row(f"mem_{owner}_b", owner=owner, vector=[0.0, 1.0, 0.0]))
    query = pack([0.0, 1.0, 0.0])
    assert index.search("t1", ["ag_1"], "test:3", query, 1)[0].row.memory_id == "mem_ag_1_b"
    assert index.search("t1", ["ag_2"], "test:3", query, 1)[0].row.memory_id == "mem_ag_2_b"
    assert [key[1] for key in index._owners] == ["ag_2"]  # ag_1's matrix was dropped
    assert index.search("t1", ["ag_1"], "test:3", query, 1)[0].row.memory_id == "mem_ag_1_b"
