"""Keeping a lease alive while a long tool call runs.

The step loop renews its lease when it commits, but a single tool call can run
longer than the lease lasts. Without renewal, another worker could take the
agent over while the call is still running, and two live copies would exist.
The heartbeat renews the lease from a background thread every third of its
lifetime for as long as the activation runs. If a renewal is refused (the lease
was taken over), it calls ``on_lost`` (the activation kills its sandbox, so no
command of a stale worker goes on writing to the workspace) and stops: the
activation's next write is then refused by the store's fencing check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..clock import Clock
from ..errors import StoreError
from ..store.base import Lease, Store


class Heartbeat:
    """Renews one lease in the background until stopped."""

    def __init__(
        self,
        store: Store,
        lease: Lease,
        ttl: float,
        clock: Clock,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._on_lost = on_lost
        self._lease = lease
        self._ttl = ttl
        self._clock = clock
        self._stop = threading.Event()
        self.lost = False
        self._thread = threading.Thread(
            target=self._run, name=f"lease-{lease.agent_id}", daemon=True
        )

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._ttl / 3):
            try:
                self._lease = self._store.renew_lease(self._lease, self._ttl, self._clock.now())
            except StoreError:
                self.lost = True
                if self._on_lost is not None:
                    self._on_lost()
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
