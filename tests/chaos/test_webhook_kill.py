"""A deliverer killed (SIGKILL) while a webhook's receiver holds its request loses
nothing: the row stays claimed until the claim lapses, no other deliverer sends it
meanwhile, and then the next one delivers it, with the same ``webhook-id``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from stead.clock import SystemClock
from stead.journal import Kind, NewEvent
from stead.notify import Deliverer, Settings
from stead.notify.addresses import allowed_networks
from stead.store import open_store
from stead.store.base import AgentRecord, Store
from stead.store.webhook_rows import WebhookRecord, WebhookRows
from tests.postgres import fresh_schema, url_for

from ..notify.receiver import receiver

REPO = Path(__file__).resolve().parents[2]
HOLD = 5.0
DELIVER_ONCE = f"""
import sys
from stead.clock import SystemClock
from stead.notify import Deliverer, Settings
from stead.notify.addresses import allowed_networks
from stead.store import open_store
store = open_store(sys.argv[1])
Deliverer(store, SystemClock(), settings=Settings(hold={HOLD}, timeout=60),
          allow=allowed_networks("127.0.0.1")).deliver_due()
"""


@contextmanager
def store_url(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'stead.db'}"
        return
    with fresh_schema() as schema:
        yield url_for(schema)


def fails(store: Store, at: float) -> None:
    state = store.create_agent(
        AgentRecord("ag_1", "t1", "a", {"name": "a", "tenant": "t1"}, at),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": "t1", "name": "a"})],
        at=at,
    )
    store.commit(state, [NewEvent(Kind.STATUS_CHANGED, {"status": "failed"})], epoch=0, at=at)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_deliverer_killed_mid_delivery_loses_nothing(kind: str, tmp_path: Path) -> None:
    clock = SystemClock()
    with store_url(kind, tmp_path) as url, receiver(["hang"]) as box:
        store = open_store(url)
        try:
            assert isinstance(store, WebhookRows)
            store.put_webhook(WebhookRecord("whk_1", "t1", box.url, ("failed",),
                                            "plain:whsec_AAAA", clock.now()))  # fmt: skip
            fails(store, clock.now())
            env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
            worker = subprocess.Popen([sys.executable, "-c", DELIVER_ONCE, url], env=env)
            try:
                assert box.arrived.wait(30), "the first deliverer never posted"
            finally:
                os.kill(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)
            killed_at = time.monotonic()
            assert worker.returncode == -signal.SIGKILL
            nxt = Deliverer(store, clock, settings=Settings(hold=HOLD, timeout=5),
                            allow=allowed_networks("127.0.0.1"))  # fmt: skip
            try:
                assert nxt.deliver_due().delivered == [], "sent while another held it"
                assert time.monotonic() - killed_at < HOLD, "too slow to see the claim held"
                assert len(box.got) == 1
                delivered: list[str] = []
                deadline = time.monotonic() + 3 * HOLD
                while not delivered and time.monotonic() < deadline:
                    time.sleep(0.5)
                    delivered = nxt.deliver_due().delivered
            finally:
                nxt.close()
            assert len(delivered) == 1
            assert [r.headers["webhook-id"] for r in box.got] == [delivered[0]] * 2
            (row,) = store.outbox("whk_1")
            assert (row.state, row.attempts, row.last_code) == ("delivered", 1, 200)
        finally:
            store.close()
