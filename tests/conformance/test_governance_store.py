"""The store's governance contract (see ``stead.store.base``), checked on every backend.

Policies are versioned per tenant; an agent's events of some kinds can be read
without its whole journal, and come back exactly as ``read_events`` gives them.
Every test takes the ``store`` fixture from this folder's conftest, so it runs
once per backend.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from stead.errors import IntegrityError, NotFound
from stead.governance.ledger import LEDGER_KINDS
from stead.journal import Kind, NewEvent
from stead.state import State
from stead.store.base import AgentRecord, PolicyRecord, Store
from stead.store.sqlite import SqliteStore

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
PERMIT = "permit(principal, action, resource);\n"
FORBID = "forbid(principal, action, resource);\n"


def create(store: Store, agent_id: str = "ag_1", tenant: str = "t1") -> State:
    return store.create_agent(
        AgentRecord(agent_id, tenant, "n", {"name": "n", "tenant": tenant}, T0),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": tenant, "name": "n"})],
        at=T0,
    )


def grant(gid: str, tool: str = "read_file") -> NewEvent:
    return NewEvent(
        Kind.GRANT_ADDED,
        {
            "grant": {
                "id": gid,
                "tool": tool,
                "args": {},
                "max_uses": None,
                "valid_from": None,
                "valid_until": None,
                "by": "alice",
                "reason": "",
                "delegable": False,
                "delegated_from": None,
            }
        },
    )


def mixed_journal(store: Store, agent_id: str = "ag_1", tenant: str = "t1") -> State:
    """An agent whose journal interleaves governance events with ordinary ones."""
    state = create(store, agent_id, tenant)
    batches = [
        [NewEvent(Kind.ACTIVATION_STARTED, {"worker": "w1"}), grant("gr_a")],
        [NewEvent(Kind.MEMORY_WRITTEN, {"values": {"k": "ünïcode"}})],
        [
            NewEvent(Kind.AUTONOMY_CHANGED, {"level": "observe", "tool": None, "by": "alice"}),
            NewEvent(Kind.GOAL_PUSHED, {"id": "g2", "description": "more"}),
            grant("gr_b", "write_file"),
        ],
        [NewEvent(Kind.GRANT_REVOKED, {"grant": "gr_a", "by": "alice", "reason": "done"})],
        [NewEvent(Kind.STEP_COMPLETED, {"changed": {}, "removed": []})],
    ]
    for i, events in enumerate(batches):
        _, state = store.commit(state, events, epoch=0, at=T0 + 1 + i)
    return state


# -- policies --------------------------------------------------------------------------


def test_no_policy_is_none_at_every_version(store: Store) -> None:
    assert store.get_policy("t1") is None
    assert store.get_policy("t1", 1) is None
    assert store.get_policy("t1", 0) is None


def test_each_put_adds_the_next_version_and_every_version_stays_readable(store: Store) -> None:
    texts = [PERMIT, FORBID, "// third\n" + PERMIT]
    versions = [store.put_policy("t1", t, f"person{i}", T0 + i) for i, t in enumerate(texts)]
    assert versions == [1, 2, 3]
    assert store.get_policy("t1") == PolicyRecord("t1", 3, texts[2], "person2", T0 + 2)
    for i, text in enumerate(texts):
        assert store.get_policy("t1", i + 1) == PolicyRecord(
            "t1", i + 1, text, f"person{i}", T0 + i
        )
    assert store.get_policy("t1", 4) is None
    assert store.get_policy("t1", 0) is None
    assert store.get_policy("t1", -1) is None


def test_versions_are_counted_per_tenant(store: Store) -> None:
    assert store.put_policy("t1", PERMIT, "a", T0) == 1
    assert store.put_policy("t1", FORBID, "a", T0) == 2
    assert store.put_policy("t2", FORBID, "b", T0) == 1
    assert store.put_policy("t1", PERMIT, "a", T0) == 3
    t2 = store.get_policy("t2")
    assert t2 is not None and (t2.tenant, t2.version, t2.text, t2.set_by) == ("t2", 1, FORBID, "b")
    assert store.get_policy("t2", 2) is None
    assert store.get_policy("t3") is None


def test_policy_text_is_stored_exactly(store: Store) -> None:
    text = '@id("ünïcode — naïve")\npermit(principal, action, resource);\n\n  // trailing  \n'
    store.put_policy("t1", text, "ana@höst", T0 + 0.25)
    record = store.get_policy("t1")
    assert record is not None
    assert (record.text, record.set_by, record.set_at) == (text, "ana@höst", T0 + 0.25)


def test_concurrent_puts_get_distinct_consecutive_versions(store: Store) -> None:
    n = 8
    got: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(n)

    def put(i: int) -> None:
        start.wait()
        version = store.put_policy("t1", f"// {i}\n{PERMIT}", f"p{i}", T0)
        with lock:
            got.append(version)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, n + 1))
    for version in got:
        record = store.get_policy("t1", version)
        assert record is not None and record.version == version


# -- reading events of some kinds --------------------------------------------------------


@pytest.mark.parametrize(
    "kinds",
    [
        LEDGER_KINDS,
        (Kind.GRANT_ADDED,),
        (Kind.GRANT_REVOKED, Kind.MEMORY_WRITTEN),
        (Kind.STEP_COMPLETED, Kind.AGENT_CREATED, Kind.STEP_COMPLETED),
        tuple(Kind),
        ("no_such_kind",),
        (),
    ],
)
def test_events_of_kinds_are_exactly_the_filtered_journal_in_order(
    store: Store, kinds: tuple[str, ...]
) -> None:
    mixed_journal(store)
    create(store, "ag_2")  # another agent's events are never included
    mixed_journal(store, "ag_3")
    expected = [e for e in store.read_events("ag_1") if e.kind in set(kinds)]
    got = store.read_events_of_kinds("ag_1", kinds)
    assert got == expected
    assert [e.seq for e in got] == sorted(e.seq for e in got)
    assert all(e.agent_id == "ag_1" for e in got)
    # byte for byte as stored, so a ledger check can re-hash them
    assert [e.data_json for e in got] == [e.data_json for e in expected]


def test_events_of_the_ledger_kinds_are_the_ones_the_ledger_folds(store: Store) -> None:
    mixed_journal(store)
    got = store.read_events_of_kinds("ag_1", LEDGER_KINDS)
    assert [(e.seq, e.kind) for e in got] == [
        (1, Kind.AGENT_CREATED),
        (3, Kind.GRANT_ADDED),
        (5, Kind.AUTONOMY_CHANGED),
        (7, Kind.GRANT_ADDED),
        (8, Kind.GRANT_REVOKED),
    ]


def test_events_of_kinds_accepts_any_iterable_of_kinds(store: Store) -> None:
    mixed_journal(store)
    from_generator = store.read_events_of_kinds("ag_1", (k for k in [Kind.GRANT_ADDED]))
    assert [e.seq for e in from_generator] == [3, 7]


def test_events_of_kinds_sees_events_appended_later(store: Store) -> None:
    state = mixed_journal(store)
    before = store.read_events_of_kinds("ag_1", [Kind.GRANT_ADDED])
    store.commit(state, [grant("gr_c")], epoch=0, at=T0 + 100)
    after = store.read_events_of_kinds("ag_1", [Kind.GRANT_ADDED])
    assert after[:-1] == before
    assert after[-1].seq == state.version + 1 and after[-1].data["grant"]["id"] == "gr_c"


def test_events_of_kinds_of_an_unknown_agent_raise_not_found(store: Store) -> None:
    create(store)
    with pytest.raises(NotFound):
        store.read_events_of_kinds("ag_nope", LEDGER_KINDS)


def test_a_corrupt_stored_event_is_an_integrity_error_for_sqlite(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "stead.db")
    try:
        mixed_journal(store)
        conn = sqlite3.connect(tmp_path / "stead.db", isolation_level=None)
        try:
            cur = conn.execute(
                "UPDATE events SET data = ? WHERE agent_id = ? AND seq = ?",
                ('{"grant": {"id": "gr_b", "tool": "*"', "ag_1", 7),
            )
            assert cur.rowcount == 1
        finally:
            conn.close()
        with pytest.raises(IntegrityError, match="event 7 is corrupt") as exc:
            store.read_events_of_kinds("ag_1", LEDGER_KINDS)
        assert exc.value.seq == 7
        # kinds that do not include the corrupt event still read
        assert [e.seq for e in store.read_events_of_kinds("ag_1", [Kind.GRANT_REVOKED])] == [8]
    finally:
        store.close()


def test_signals_wait_in_order_until_dropped(store: Store) -> None:
    create(store)
    create(store, "ag_2")
    store.post_signal("ag_1", "s2", {"n": 2}, T0 + 2)
    store.post_signal("ag_1", "s1", {"n": 1}, T0 + 1)
    store.post_signal("ag_2", "s9", {"n": 9}, T0)
    assert store.signals("ag_1") == [("s1", {"n": 1}), ("s2", {"n": 2})]
    store.drop_signals("ag_1", ["s1"])
    assert store.signals("ag_1") == [("s2", {"n": 2})]
    assert store.signals("ag_2") == [("s9", {"n": 9})]  # another agent's are its own
    with pytest.raises(NotFound):
        store.post_signal("ag_nope", "s", {}, T0)
