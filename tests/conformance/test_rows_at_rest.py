"""Events read back exactly as they were hashed, however a backend keeps them at rest.

The SQL backends compress rows (:mod:`stead.store.codec`); the memory store keeps
objects. On every backend the data text, every hash and the folded state read back
unchanged, for rows that compress well, rows too short to compress, and rows that
do not compress at all.
"""

from __future__ import annotations

import random
import string

from tests.conformance.test_store_conformance import T0, create

from stead.journal import Kind, NewEvent, verify_chain
from stead.state import fold
from stead.store.base import Store


def shapes() -> list[NewEvent]:
    noise = random.Random(3)
    return [
        NewEvent(Kind.MEMORY_WRITTEN, {"values": {}}),
        NewEvent(Kind.MEMORY_WRITTEN, {"values": {"k": "v"}}),
        NewEvent(Kind.MEMORY_WRITTEN, {"values": {"note": "ünïcode ✓ 𝄞 " * 40}}),
        NewEvent(Kind.MEMORY_WRITTEN, {"values": {"lines": "def f(x):\n    return x\n" * 2000}}),
        NewEvent(
            Kind.MEMORY_WRITTEN,
            {"values": {"random": "".join(noise.choices(string.printable, k=3000))}},
        ),
        NewEvent(Kind.STEP_COMPLETED, {"changed": {"a.txt": "ab" * 32}, "removed": []}),
    ]


def test_every_shape_of_row_reads_back_as_it_was_hashed(store: Store) -> None:
    state = create(store)
    sealed, state = store.commit(state, shapes(), epoch=0, at=T0 + 1)
    stored = list(store.read_events("ag_1"))
    assert [(e.seq, e.hash, e.prev_hash, e.data_json) for e in stored[1:]] == [
        (e.seq, e.hash, e.prev_hash, e.data_json) for e in sealed
    ]
    assert [e.data for e in stored[1:]] == [e.data for e in sealed]
    assert verify_chain(stored).ok
    assert fold(stored) == state == store.load_state("ag_1")
    assert store.read_events_of_kinds("ag_1", [Kind.STEP_COMPLETED]) == stored[-1:]


def test_the_record_and_state_read_back_whole(store: Store) -> None:
    state = create(store)
    _, state = store.commit(state, shapes()[2:4], epoch=0, at=T0 + 1)
    assert store.load_state("ag_1") == state
    assert store.get_record("ag_1").spec["model"] == "scripted:s.yaml"
