"""The webhook outbox, the same on every backend (see ``stead.store.webhook_rows``).

A write that appends an approval request or moves an agent to needs_attention,
completed or failed puts one outbox row per interested webhook of its tenant,
in its own transaction: a refused write leaves none. Claims keep two
deliverers off one row until the claim lapses; only the claim's holder settles.
"""

from __future__ import annotations

import json

import pytest

from stead.errors import VersionConflict
from stead.journal import Kind, NewEvent
from stead.state import State
from stead.store.base import AgentRecord, Store
from stead.store.webhook_rows import Attempt, WebhookRecord, WebhookRows

T0 = 1_767_225_600.0


def rows(store: Store) -> WebhookRows:
    assert isinstance(store, WebhookRows)
    return store


def create(store: Store, agent_id: str, tenant: str = "t1") -> State:
    return store.create_agent(
        AgentRecord(agent_id, tenant, f"{agent_id} name", {"name": agent_id, "tenant": tenant}, T0),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": tenant, "name": f"{agent_id} name"})],
        at=T0,
    )


def hook(hook_id: str, tenant: str = "t1", events: tuple[str, ...] = ("approval_requested",
         "needs_attention", "completed", "failed")) -> WebhookRecord:  # fmt: skip
    return WebhookRecord(hook_id, tenant, "https://example.com/h", events, "plain:whsec_AA==", T0)


ASKED = NewEvent(Kind.APPROVAL_REQUESTED, {
    "approval_id": "apr_1", "call_id": "c1", "tool": "shell",
    "args": {"cmd": "rm -rf build\x1b[2J"}, "args_hash": "h", "policy_version": 0,
    "reason": "needs approval", "action": 0})  # fmt: skip
FAILED = NewEvent(Kind.STATUS_CHANGED, {"status": "failed", "reason": "model gave up"})


def test_notices_are_written_with_their_events_for_each_interested_hook(store: Store) -> None:
    w = rows(store)
    w.put_webhook(hook("whk_1"))
    w.put_webhook(hook("whk_2", events=("failed",)))
    w.put_webhook(hook("whk_3", tenant="t2"))
    state = create(store, "ag_1")
    _, state = store.commit(state, [ASKED], epoch=0, at=T0 + 1)
    assert [r.event for r in w.outbox("whk_1")] == ["approval_requested"]
    assert w.outbox("whk_2") == [] and w.outbox("whk_3") == []
    body = json.loads(w.outbox("whk_1")[0].body)
    assert body["type"] == "approval.requested"
    assert body["timestamp"] == "2026-01-01T00:00:01.000Z"
    data = body["data"]
    assert (data["agent_id"], data["tenant"], data["name"]) == ("ag_1", "t1", "ag_1 name")
    assert data["approval"]["approval_id"] == "apr_1" and data["approval"]["tool"] == "shell"
    assert "rm -rf build" in data["approval"]["args_summary"]
    assert "\x1b" not in data["approval"]["args_summary"], "a control character passed on"
    store.commit(state, [FAILED], epoch=0, at=T0 + 2)
    assert [r.event for r in w.outbox("whk_1")] == ["failed", "approval_requested"]
    failed = json.loads(w.outbox("whk_2")[0].body)
    assert failed["type"] == "agent.failed" and failed["data"]["reason"] == "model gave up"
    assert failed["data"]["status"] == "failed"


def test_a_refused_write_leaves_no_notice(store: Store) -> None:
    w = rows(store)
    w.put_webhook(hook("whk_1"))
    state = create(store, "ag_1")
    store.commit(state, [NewEvent(Kind.STEP_COMPLETED, {})], epoch=0, at=T0 + 1)
    with pytest.raises(VersionConflict):
        store.commit(state, [FAILED], epoch=0, at=T0 + 2)  # based on an old version
    assert w.outbox("whk_1") == []


def test_a_status_told_once_when_it_is_reached(store: Store) -> None:
    w = rows(store)
    w.put_webhook(hook("whk_1"))
    state = create(store, "ag_1")
    attention = NewEvent(Kind.STATUS_CHANGED, {"status": "needs_attention", "reason": "look"})
    _, state = store.commit(state, [attention], epoch=0, at=T0 + 1)
    _, state = store.commit(state, [NewEvent(Kind.STEP_COMPLETED, {})], epoch=0, at=T0 + 2)
    assert [r.event for r in w.outbox("whk_1")] == ["needs_attention"]


def test_claims_keep_deliverers_apart_until_they_lapse(store: Store) -> None:
    w = rows(store)
    w.put_webhook(hook("whk_1"))
    create_and_fail(store)
    first = w.claim_deliveries("clm_a", T0 + 10, 60, 10)
    assert [r.event for r in first] == ["failed"]
    assert w.claim_deliveries("clm_b", T0 + 11, 60, 10) == [], "claimed twice"
    again = w.claim_deliveries("clm_b", T0 + 71, 60, 10)  # a's claim lapsed: a died
    assert [r.msg_id for r in again] == [first[0].msg_id]
    msg = first[0].msg_id
    late = Attempt(msg, 1, "whk_1", T0 + 72, 200, "", 0.1)
    assert not w.settle_delivery("clm_a", late, "delivered", T0 + 72), "a lapsed claim settled"
    miss = Attempt(msg, 1, "whk_1", T0 + 72, 500, "answered 500", 0.2)
    assert w.settle_delivery("clm_b", miss, "pending", T0 + 100)
    assert w.claim_deliveries("clm_c", T0 + 99, 60, 10) == [], "not due yet"
    retry = w.claim_deliveries("clm_c", T0 + 100, 60, 10)
    assert [r.msg_id for r in retry] == [msg] and retry[0].attempts == 1
    ok = Attempt(msg, 2, "whk_1", T0 + 101, 204, "", 0.1)
    assert w.settle_delivery("clm_c", ok, "delivered", T0 + 101)
    assert not w.settle_delivery("clm_c", ok, "delivered", T0 + 101), "settled twice"
    (row,) = w.outbox("whk_1")
    assert (row.state, row.attempts, row.last_code, row.done_at) == ("delivered", 2, 204, T0 + 101)
    assert [(a.attempt, a.code) for a in w.attempts("whk_1")] == [(2, 204), (1, 500)]
    assert w.claim_deliveries("clm_d", T0 + 9999, 60, 10) == []


def create_and_fail(store: Store, agent_id: str = "ag_1") -> None:
    store.commit(create(store, agent_id), [FAILED], epoch=0, at=T0 + 1)


def test_hooks_are_listed_per_tenant_and_removed_with_their_rows(store: Store) -> None:
    w = rows(store)
    w.put_webhook(hook("whk_1"))
    w.put_webhook(hook("whk_2", tenant="t2"))
    assert w.get_webhook("whk_1") == hook("whk_1")
    assert [h.hook_id for h in w.list_webhooks("t1")] == ["whk_1"]
    assert [h.hook_id for h in w.list_webhooks()] == ["whk_1", "whk_2"]
    create_and_fail(store)
    (row,) = w.claim_deliveries("clm_a", T0 + 5, 60, 10)
    w.settle_delivery("clm_a", Attempt(row.msg_id, 1, "whk_1", T0 + 6, None, "no", 1.0),
                      "failed", T0 + 6)  # fmt: skip
    assert w.outbox("whk_1")[0].state == "failed"
    assert w.delete_webhook("whk_1") and not w.delete_webhook("whk_1")
    assert w.get_webhook("whk_1") is None and w.outbox("whk_1") == []
    assert w.attempts("whk_1") == []
    assert [h.hook_id for h in w.list_webhooks()] == ["whk_2"]


def test_deliverers_claiming_at_once_get_different_rows(store: Store) -> None:
    import threading

    w = rows(store)
    w.put_webhook(hook("whk_1"))
    for i in range(12):
        create_and_fail(store, f"ag_{i:02d}")
    start = threading.Barrier(3)
    got: dict[str, list[str]] = {}

    def claimer(name: str) -> None:
        start.wait()
        got[name] = [r.msg_id for r in w.claim_deliveries(name, T0 + 10, 60, 8)]

    threads = [threading.Thread(target=claimer, args=(f"clm_{n}",)) for n in "abc"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    claimed = [m for ids in got.values() for m in ids]
    assert len(claimed) == len(set(claimed)) == 12, got


def test_settled_rows_are_forgotten_once_old_and_pending_ones_never(store: Store) -> None:
    w = rows(store)
    w.put_webhook(hook("whk_1"))
    for i in range(3):
        create_and_fail(store, f"ag_{i}")
    a, b, c = w.claim_deliveries("clm_a", T0 + 5, 60, 10)
    w.settle_delivery("clm_a", Attempt(a.msg_id, 1, "whk_1", T0 + 6, 200, "", 0.1),
                      "delivered", T0 + 6)  # fmt: skip
    w.settle_delivery("clm_a", Attempt(b.msg_id, 1, "whk_1", T0 + 100, None, "x", 0.1),
                      "failed", T0 + 100)  # fmt: skip
    w.settle_delivery("clm_a", Attempt(c.msg_id, 1, "whk_1", T0 + 7, 500, "x", 0.1),
                      "pending", T0 + 7)  # fmt: skip
    assert w.prune_deliveries(T0 + 50) == 1
    assert {r.msg_id for r in w.outbox("whk_1")} == {b.msg_id, c.msg_id}
    assert {x.msg_id for x in w.attempts("whk_1")} == {b.msg_id, c.msg_id}
    assert w.prune_deliveries(T0 + 10**6) == 1
    assert [r.msg_id for r in w.outbox("whk_1")] == [c.msg_id]


def test_a_restore_does_not_tell_again_the_status_the_agent_slept_in(store: Store) -> None:
    w = rows(store)
    w.put_webhook(hook("whk_1"))
    state = create(store, "ag_1")
    attention = NewEvent(Kind.STATUS_CHANGED, {"status": "needs_attention", "reason": "look"})
    _, state = store.commit(state, [attention], epoch=0, at=T0 + 1)
    slept = NewEvent(Kind.HIBERNATED, {
        "snapshot_id": "snap_1", "manifest": {}, "manifest_digest": "d" * 64, "files": 0,
        "bytes": 0, "stored_bytes": 0, "reason": "idle"})  # fmt: skip
    _, state = store.commit(state, [slept], epoch=0, at=T0 + 2)
    assert state.status == "hibernated"
    woke = NewEvent(Kind.RESTORED, {"snapshot_id": "snap_1", "by": "host:1:2"})
    _, state = store.commit(state, [woke], epoch=0, at=T0 + 3)
    assert state.status == "needs_attention"
    assert [r.event for r in w.outbox("whk_1")] == ["needs_attention"]
