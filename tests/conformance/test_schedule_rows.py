"""Schedule rows, the same on every backend (see ``stead.store.schedule_rows``).

A claim keeps other workers off a schedule until it lapses; recording firings
is a compare-and-set on the claim and the due time, so a due time is recorded
once however many workers race; only the claim's holder settles a firing.
"""

from __future__ import annotations

import threading

import pytest

from stead.store.base import Store
from stead.store.schedule_rows import FiringRow, ScheduleRecord, ScheduleRows

T0 = 1_767_225_600.0


def rows(store: Store) -> ScheduleRows:
    assert isinstance(store, ScheduleRows)
    return store


def schedule(sid: str = "sch_1", tenant: str = "t1", due: float = T0 + 60) -> ScheduleRecord:
    body = {"definition": {"every": 60.0, "start": T0, "message": "go"}, "made_by": "ann"}
    return ScheduleRecord(sid, tenant, "ag_1", body, due, due)


def firing(due: float, state: str = "pending", sid: str = "sch_1") -> FiringRow:
    return FiringRow(sid, due, "t1", state, 1, "ag_1", "", T0)


def test_a_schedule_reads_back_as_stored_and_by_tenant(store: Store) -> None:
    r = rows(store)
    r.put_schedule(schedule())
    r.put_schedule(schedule("sch_2", tenant="t2"))
    assert r.get_schedule("sch_1") == schedule()
    assert [s.schedule_id for s in r.list_schedules("t1")] == ["sch_1"]
    assert [s.schedule_id for s in r.list_schedules()] == ["sch_1", "sch_2"]
    assert r.list_schedules("t1", agent_id="ag_2") == []
    with pytest.raises(ValueError, match="already"):
        r.put_schedule(schedule())
    assert r.next_schedule_fire("t2") == T0 + 60
    assert r.get_schedule("sch_9") is None


def test_only_due_schedules_are_claimed_and_a_claim_keeps_others_off_until_it_lapses(
    store: Store,
) -> None:
    r = rows(store)
    r.put_schedule(schedule("sch_1", due=T0 + 60))
    r.put_schedule(schedule("sch_2", due=T0 + 600))
    assert r.claim_schedules("w1", T0, 30, 10) == []
    (claimed,) = r.claim_schedules("w1", T0 + 61, 30, 10)
    # times read back as floats however they were stored (a jitter is seeded by them)
    assert claimed == schedule() and type(claimed.next_due) is float
    assert r.claim_schedules("w2", T0 + 62, 30, 10) == []  # held by w1
    assert [s.schedule_id for s in r.claim_schedules("w2", T0 + 92, 30, 10)] == ["sch_1"]
    r.release_schedules("w2", ["sch_1"])
    assert [s.schedule_id for s in r.claim_schedules("w3", T0 + 93, 30, 10, tenant="t1")] == [
        "sch_1"
    ]
    assert r.claim_schedules("w4", T0 + 700, 30, 10, tenant="t9") == []


def test_paused_schedules_are_not_claimed_until_resumed(store: Store) -> None:
    r = rows(store)
    r.put_schedule(schedule())
    assert r.set_schedule_time("sch_1", True, None, None)
    assert r.claim_schedules("w1", T0 + 999, 30, 10) == []
    assert r.next_schedule_fire() is None
    assert r.set_schedule_time("sch_1", False, T0 + 1020, T0 + 1020)
    assert [s.next_due for s in r.claim_schedules("w1", T0 + 1020, 30, 10)] == [T0 + 1020]
    assert not r.set_schedule_time("sch_9", True, None, None)


def test_firings_are_recorded_once_by_the_claim_holder_from_the_due_time_it_read(
    store: Store,
) -> None:
    r = rows(store)
    r.put_schedule(schedule())
    r.claim_schedules("w1", T0 + 61, 30, 10)
    assert not r.record_firings("w2", "sch_1", T0 + 60, T0 + 120, T0 + 120, [firing(T0 + 60)])
    assert not r.record_firings("w1", "sch_1", T0 + 0, T0 + 120, T0 + 120, [firing(T0 + 60)])
    assert r.record_firings("w1", "sch_1", T0 + 60, T0 + 120, T0 + 120, [firing(T0 + 60)])
    # the same due time again: the schedule has moved on, nothing is recorded
    assert not r.record_firings("w1", "sch_1", T0 + 60, T0 + 120, T0 + 120, [firing(T0 + 60)])
    stored = r.get_schedule("sch_1")
    assert stored is not None and stored.next_due == T0 + 120 and stored.pending == 1
    assert [f.due for f in r.pending_firings("sch_1")] == [T0 + 60]
    # a claim with pending firings is claimed again even before its next due time
    r.release_schedules("w1", ["sch_1"])
    assert [s.schedule_id for s in r.claim_schedules("w2", T0 + 62, 30, 10)] == ["sch_1"]


def test_only_the_claim_holder_settles_a_firing_and_only_once(store: Store) -> None:
    r = rows(store)
    r.put_schedule(schedule())
    r.claim_schedules("w1", T0 + 61, 30, 10)
    missed = FiringRow("sch_1", T0 + 1, "t1", "missed", 5, "ag_1", "5 passed", T0, T0)
    assert r.record_firings("w1", "sch_1", T0 + 60, None, None, [firing(T0 + 60), missed])
    assert not r.settle_firing("w2", firing(T0 + 60), "delivered", "", T0 + 62)
    assert r.settle_firing("w1", firing(T0 + 60), "delivered", "", T0 + 62)
    assert not r.settle_firing("w1", firing(T0 + 60), "delivered", "", T0 + 63)
    stored = r.get_schedule("sch_1")
    assert stored is not None
    assert (stored.pending, stored.runs, stored.last_run, stored.next_due) == (0, 1, "ag_1", None)
    shown = r.firings("sch_1")
    assert [(f.due, f.state, f.count) for f in shown] == [
        (T0 + 60, "delivered", 1), (T0 + 1, "missed", 5)]  # fmt: skip
    assert shown[0].done_at == T0 + 62
    assert (
        r.delete_schedule("sch_1") and r.firings("sch_1") == [] and not r.delete_schedule("sch_1")
    )


def test_racing_claims_record_each_due_time_once(store: Store) -> None:
    """Many threads claim and record at once: every due time is recorded exactly once."""
    r = rows(store)
    for i in range(5):
        r.put_schedule(schedule(f"sch_{i}", due=T0 + 60))
    recorded: list[tuple[str, float]] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        for step in range(20):
            now = T0 + 60 * (step + 1) + 1
            for s in r.claim_schedules(name, now, 0.001, 10):
                assert s.next_due is not None
                due = s.next_due
                if r.record_firings(name, s.schedule_id, due, due + 60, due + 60,
                                    [firing(due, sid=s.schedule_id)]):  # fmt: skip
                    with lock:
                        recorded.append((s.schedule_id, due))
                r.release_schedules(name, [s.schedule_id])

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(recorded) == len(set(recorded))
    for i in range(5):
        dues = sorted(f.due for f in r.firings(f"sch_{i}", 100))
        assert dues == sorted(d for s, d in recorded if s == f"sch_{i}")


def test_a_due_time_recorded_before_is_not_recorded_again_even_if_the_row_goes_back(
    store: Store,
) -> None:
    r = rows(store)
    r.put_schedule(schedule())
    r.claim_schedules("w1", T0 + 61, 30, 10)
    assert r.record_firings("w1", "sch_1", T0 + 60, T0 + 120, T0 + 120, [firing(T0 + 60)])
    assert r.settle_firing("w1", firing(T0 + 60), "delivered", "", T0 + 62)
    assert r.set_schedule_time("sch_1", False, T0 + 60, T0 + 60)  # set back by hand
    assert not r.record_firings("w1", "sch_1", T0 + 60, T0 + 120, T0 + 120, [firing(T0 + 60)])
    stored = r.get_schedule("sch_1")
    assert stored is not None and stored.next_due == T0 + 60 and stored.pending == 0
    assert [(f.due, f.state) for f in r.firings("sch_1")] == [(T0 + 60, "delivered")]
