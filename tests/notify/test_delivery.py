"""Webhooks delivered from the outbox to a receiver of our own, on every store backend:
a 500, then no answer in time, then a 200; the same id, body and a valid signature
each time; given up on (and shown failed) once too old."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from stead.clock import FakeClock
from stead.journal import Kind, NewEvent
from stead.notify import Deliverer, Settings, deliver_due, hooks
from stead.notify.signing import sign
from stead.sandbox.secrets import new_key
from stead.store.base import AgentRecord, Store
from stead.store.memory import MemoryStore
from stead.store.sqlite import SqliteStore
from stead.store.webhook_rows import WebhookRows
from tests.postgres import postgres_store

from .receiver import receiver, verify

T0 = 1_767_225_600.0
FAST = Settings(timeout=0.5, first_delay=2.0, max_delay=60.0, give_up_after=3 * 86400.0)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "postgres":
        with postgres_store() as pg:
            yield pg
        return
    made: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(autouse=True)
def local_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEAD_WEBHOOK_ALLOW", "127.0.0.1")


def agent_fails(store: Store, agent_id: str = "ag_1") -> None:
    state = store.create_agent(
        AgentRecord(agent_id, "t1", "builder", {"name": "builder", "tenant": "t1"}, T0),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": "t1", "name": "builder"})],
        at=T0,
    )
    failed = NewEvent(Kind.STATUS_CHANGED, {"status": "failed", "reason": "tests failed"})
    store.commit(state, [failed], epoch=0, at=T0 + 1)


def rows(store: Store) -> WebhookRows:
    assert isinstance(store, WebhookRows)
    return store


def test_a_failing_then_silent_receiver_gets_it_once_it_recovers(store: Store) -> None:
    clock = FakeClock(T0)
    key = base64_key()
    with receiver([500, "slow"], slow=2.0) as box:
        secret, hook = hooks.add(rows(store), "t1", box.url, ["failed"], clock, key,
                                 hooks.addresses.allowed_networks())  # fmt: skip
        assert hook.secret.startswith("sealed:") and secret not in hook.secret
        agent_fails(store)
        d = Deliverer(rows(store), clock, settings=FAST, key=key, rng=random.Random(3))
        try:
            clock.advance(2)
            first = d.deliver_due()
            assert first.retrying and not first.delivered
            assert d.deliver_due().retrying == [], "retried before its backoff"
            clock.advance(10)
            second = d.deliver_due()
            assert second.retrying == first.retrying  # no answer within the timeout
            clock.advance(30)
            third = d.deliver_due()
            assert third.delivered == first.retrying
            clock.advance(3600)
            assert d.deliver_due().delivered == []  # exactly once acknowledged
        finally:
            d.close()
    assert len(box.got) == 3
    ids = {r.headers["webhook-id"] for r in box.got}
    assert ids == set(first.retrying), "the webhook-id changed between tries"
    assert len({r.body for r in box.got}) == 1
    for r in box.got:
        assert verify(secret, r.headers, r.body), "a signature does not verify"
        assert not verify("whsec_" + "A" * 43 + "=", r.headers, r.body)
        assert r.headers["content-type"] == "application/json"
        assert r.headers["host"] == f"127.0.0.1:{box.port}"
    body = json.loads(box.got[0].body)
    assert body["type"] == "agent.failed"
    assert body["data"]["agent_id"] == "ag_1" and body["data"]["reason"] == "tests failed"
    (row,) = rows(store).outbox(hook.hook_id)
    assert (row.state, row.attempts, row.last_code) == ("delivered", 3, 200)
    tries = rows(store).attempts(hook.hook_id)
    assert [t.code for t in tries] == [200, None, 500]
    assert "no answer within" in tries[1].error and tries[2].error == "answered 500"
    listed = hooks.listing(rows(store), "t1")
    assert listed[0]["last"]["state"] == "delivered" and "secret" not in json.dumps(
        {k: v for k, v in listed[0].items() if k != "secret_sealed"})  # fmt: skip


def base64_key() -> bytes:
    import base64

    return base64.b64decode(new_key())


def test_a_receiver_that_never_acknowledges_is_given_up_on_and_shown_failed(
    store: Store,
) -> None:
    clock = FakeClock(T0)
    give_up = Settings(timeout=0.5, first_delay=60.0, max_delay=600.0, give_up_after=900.0)
    with receiver([500] * 50) as box:
        _, hook = hooks.add(rows(store), "t1", box.url, None, clock, None,
                            hooks.addresses.allowed_networks())  # fmt: skip
        agent_fails(store)
        d = Deliverer(rows(store), clock, settings=give_up, rng=random.Random(1))
        try:
            failed: list[str] = []
            for _ in range(40):
                clock.advance(601)
                failed += d.deliver_due().failed
            assert len(failed) == 1
        finally:
            d.close()
    (row,) = rows(store).outbox(hook.hook_id)
    assert row.state == "failed" and row.last_code == 500 and 2 <= row.attempts < 10
    assert len(box.got) == row.attempts
    assert hooks.listing(rows(store), "t1")[0]["last"]["state"] == "failed"


def test_backoff_doubles_with_seeded_jitter_and_one_pass_helper(store: Store) -> None:
    from stead.notify.deliverer import backoff

    s = Settings(first_delay=5.0, max_delay=100.0)
    delays = [backoff(n, s, random.Random(9)) for n in range(1, 7)]
    assert all(0.5 * b <= d < 1.5 * b for d, b in zip(delays, [5, 10, 20, 40, 80, 100],
                                                        strict=True))  # fmt: skip
    assert delays == [backoff(n, s, random.Random(9)) for n in range(1, 7)], "not seeded"
    clock = FakeClock(T0)
    with receiver([]) as box:
        hooks.add(rows(store), "t1", box.url, None, clock, None,
                  hooks.addresses.allowed_networks())  # fmt: skip
        agent_fails(store)
        clock.advance(1)
        report = deliver_due(rows(store), clock, settings=FAST)
    assert len(report.delivered) == 1 and len(box.got) == 1


def test_the_signature_matches_the_standard_webhooks_example() -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    got = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert got == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_operator_sets_when_a_notice_is_given_up() -> None:
    from stead.errors import UsageError
    from stead.notify.deliverer import settings_from_env

    assert settings_from_env({}).give_up_after == 3 * 86400
    assert settings_from_env({"STEAD_WEBHOOK_GIVE_UP_AFTER": "3600"}).give_up_after == 3600
    for bad in ("soon", "5", "nan", "1e12"):
        with pytest.raises(UsageError, match="STEAD_WEBHOOK_GIVE_UP_AFTER"):
            settings_from_env({"STEAD_WEBHOOK_GIVE_UP_AFTER": bad})


def test_the_docs_verifying_snippet_accepts_a_delivery_and_refuses_a_forgery() -> None:
    import time

    page = Path(__file__).parents[2] / "docs" / "guide" / "webhooks.md"
    readme = page.read_text(encoding="utf-8")
    section = readme.split("**Verifying a delivery.**", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, object] = {}
    exec(code, scope)
    check = scope["verify"]
    assert callable(check)
    secret, body, now = "whsec_" + "c2VjcmV0LWtleS1mb3ItdGVzdHM=", b'{"type":"agent.failed"}', int(
        time.time())  # fmt: skip
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now),
               "webhook-signature": sign(secret, "msg_1", now, body)}  # fmt: skip
    assert check(secret, headers, body)
    assert not check(secret, headers, body + b" ")
    assert not check(secret, {**headers, "webhook-id": "msg_2"}, body)
    old = now - 3600
    stale = {**headers, "webhook-timestamp": str(old),
             "webhook-signature": sign(secret, "msg_1", old, body)}  # fmt: skip
    assert not check(secret, stale, body)
