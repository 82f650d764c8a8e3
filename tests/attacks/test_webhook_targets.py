"""Attacks through a webhook's URL (docs/security.md, "Webhooks"): a tenant's admin
names it and the host posts to it, so it must not reach the operator's own network.

Refused by default: loopback, private, link-local (cloud metadata), IPv4 inside
IPv6; a name resolving to any such address, even among public ones; plain
http:// outside the networks the operator allows. The connection goes to the
address that was checked (DNS rebinding changes nothing), and a redirect is
never followed. Another tenant's webhook reads as missing.
"""

from __future__ import annotations

import random

import httpx
import pytest

from stead.clock import FakeClock
from stead.errors import NotFound, UsageError, WebhookRefused
from stead.journal import Kind, NewEvent
from stead.notify import Deliverer, Settings, hooks
from stead.notify.addresses import allowed_networks, pin
from stead.store.base import AgentRecord
from stead.store.memory import MemoryStore
from stead.store.webhook_rows import WebhookRecord

from ..notify.receiver import receiver

T0 = 1_767_225_600.0
FAST = Settings(timeout=0.5, first_delay=2.0)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "https://127.0.0.1:8443/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://10.1.2.3/hook",
        "https://192.168.0.1/hook",
        "https://100.100.100.200/hook",
        "https://[::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://[fd00:ec2::254]/hook",
        "https://0.0.0.0/hook",
        "http://93.184.216.34/hook",  # public, but plain http
        "file:///etc/passwd",
        "https://user:pw@example.com/hook",
        "https://exa mple.com/hook",
    ],
)
def test_a_webhook_to_the_operators_network_is_refused_when_added(url: str) -> None:
    with pytest.raises(UsageError):
        hooks.add(MemoryStore(), "t1", url, None, FakeClock(T0), None, allowed_networks(""))


def test_a_name_that_resolves_to_a_private_address_is_refused_at_delivery() -> None:
    public = lambda host, port: ["93.184.216.34"]  # noqa: E731
    assert pin("https://hooks.example/x", (), public).address == "93.184.216.34"
    for answer in (["127.0.0.1"], ["93.184.216.34", "10.0.0.7"], ["::ffff:169.254.169.254"]):
        with pytest.raises(WebhookRefused, match="not a public address"):
            pin("https://hooks.example/x", (), lambda host, port, a=answer: a)


def test_the_connection_goes_to_the_address_that_was_checked() -> None:
    """A rebinding DNS answers the check with a public address and the connection with
    a private one; stead resolves once and connects to the checked address itself."""
    answers = iter([["93.184.216.34"], ["127.0.0.1"], ["127.0.0.1"]])
    seen: list[httpx.Request] = []

    def transport(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204, stream=httpx.ByteStream(b""))

    store = MemoryStore()
    store.put_webhook(WebhookRecord("whk_1", "t1", "https://hooks.example/in", ("failed",),
                                    "plain:whsec_AAAA", T0))  # fmt: skip
    fail(store)
    d = Deliverer(store, FakeClock(T0 + 5), settings=FAST, allow=(), rng=random.Random(1),
                  resolve=lambda host, port: next(answers),
                  transport=httpx.MockTransport(transport))  # fmt: skip
    assert len(d.deliver_due().delivered) == 1
    (request,) = seen
    assert request.url.host == "93.184.216.34" and request.url.scheme == "https"
    assert request.headers["host"] == "hooks.example"
    assert request.extensions["sni_hostname"] == "hooks.example"


def test_a_loopback_receiver_gets_nothing_unless_the_operator_allows_it() -> None:
    with receiver([]) as box:
        store = MemoryStore()
        store.put_webhook(WebhookRecord("whk_1", "t1", box.url, ("failed",),
                                        "plain:whsec_AAAA", T0))  # fmt: skip
        fail(store)
        d = Deliverer(store, FakeClock(T0 + 5), settings=FAST, allow=(), rng=random.Random(1))
        assert d.deliver_due().retrying
        d.close()
        assert box.got == []
        (attempt,) = store.attempts("whk_1")
        assert "not a public address" in attempt.error and attempt.code is None


def test_a_redirect_is_not_followed() -> None:
    with receiver(["redirect"]) as box:
        store = MemoryStore()
        store.put_webhook(WebhookRecord("whk_1", "t1", box.url, ("failed",),
                                        "plain:whsec_AAAA", T0))  # fmt: skip
        fail(store)
        d = Deliverer(store, FakeClock(T0 + 5), settings=FAST,
                      allow=allowed_networks("127.0.0.1"), rng=random.Random(1))  # fmt: skip
        assert d.deliver_due().retrying
        d.close()
        assert len(box.got) == 1
        (attempt,) = store.attempts("whk_1")
        assert attempt.code == 302 and attempt.error == "redirects are not followed"


def test_another_tenants_webhook_reads_as_missing() -> None:
    store = MemoryStore()
    _, mine = hooks.add(store, "t1", "https://hooks.example/in", None, FakeClock(T0), None)
    for call in (lambda: hooks.find(store, "t2", mine.hook_id),
                 lambda: hooks.remove(store, "t2", mine.hook_id),
                 lambda: hooks.history(store, "t2", mine.hook_id)):  # fmt: skip
        with pytest.raises(NotFound, match="no webhook"):
            call()
    assert store.get_webhook(mine.hook_id) is not None
    assert hooks.listing(store, "t2") == []


def fail(store: MemoryStore) -> None:
    state = store.create_agent(
        AgentRecord("ag_1", "t1", "a", {"name": "a", "tenant": "t1"}, T0),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": "t1", "name": "a"})],
        at=T0,
    )
    store.commit(state, [NewEvent(Kind.STATUS_CHANGED, {"status": "failed"})], epoch=0, at=T0)


def test_a_receiver_trickling_its_answer_does_not_hold_the_pass() -> None:
    """A receiver that sends its headers a byte at a time, each within the read
    timeout, would hold a try for hours; the pass ends in bounded time anyway, the
    row unsettled (its claim lapses and a later pass tries again)."""
    import socket
    import threading
    import time

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        with conn:
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while not stop.is_set():
                try:
                    conn.sendall(b"a")
                except OSError:
                    return
                time.sleep(0.1)

    threading.Thread(target=trickle, daemon=True).start()
    store = MemoryStore()
    store.put_webhook(WebhookRecord("whk_1", "t1", f"http://127.0.0.1:{port}/in", ("failed",),
                                    "plain:whsec_AAAA", T0))  # fmt: skip
    fail(store)
    d = Deliverer(store, FakeClock(T0 + 5), settings=Settings(timeout=0.3, hold=60),
                  allow=allowed_networks("127.0.0.1"), rng=random.Random(1))  # fmt: skip
    started = time.monotonic()
    try:
        report = d.deliver_due()
        took = time.monotonic() - started
        assert took < 3, f"the pass took {took:.1f}s"
        assert report.delivered == report.retrying == report.failed == []
        assert store.attempts("whk_1") == [] and store.outbox("whk_1")[0].state == "pending"
    finally:
        stop.set()
        d.close()
        listener.close()
