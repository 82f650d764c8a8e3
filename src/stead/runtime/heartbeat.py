"""Keeping a lease alive while a long tool call runs.

The step loop renews its lease when it commits, but a single tool call can run
longer than the lease lasts. Without renewal, another worker could take the
agent over while the call is still running, and two live copies would exist.
The heartbeat renews the lease from a background thread every third of its
lifetime for as long as the activation runs, and tells ``on_renewed`` (which
moves the sandbox watchdog's deadline on, :mod:`stead.sandbox.watchdog`). If a
renewal is refused (the lease was taken over), it calls ``on_lost`` (the
activation kills its sandbox, so no command of a stale worker goes on writing
to the workspace) and stops: the activation's next write is then refused by
the store's fencing check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..clock import Clock
from ..errors import StoreError
from ..store.base import Lease, Store


@dataclass(frozen=True, slots=True)
class _Hooks:
    on_lost: Callable[[], None] | None
    on_renewed: Callable[[Lease], None] | None


class Heartbeats:
    """Renews the leases of many activations from one thread, in one store call each
    round: a worker that keeps thousands of agents in flight cannot give each a
    thread (:mod:`stead.workers.parked`); an activation run on its own has one of
    these to itself. A lease whose renewal is refused is dropped and its
    ``on_lost`` called; each renewed one is passed to its ``on_renewed``. A round the
    store cannot answer at all loses nothing yet; once a lease has gone unrenewed
    for its whole lifetime it may be another worker's, so it is given up then."""

    def __init__(self, store: Store, ttl: float, clock: Clock) -> None:
        self._store = store
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, tuple[Lease, _Hooks]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leases", daemon=True)
        self._thread.start()

    def add(
        self,
        lease: Lease,
        on_lost: Callable[[], None] | None = None,
        on_renewed: Callable[[Lease], None] | None = None,
    ) -> None:
        with self._lock:
            self._held[lease.agent_id] = (lease, _Hooks(on_lost, on_renewed))

    def discard(self, agent_id: str) -> None:
        with self._lock:
            self._held.pop(agent_id, None)

    def _run(self) -> None:
        while not self._stop.wait(self._ttl / 3):
            self.renew()

    def renew(self) -> None:
        """One round: renew every lease held now."""
        with self._lock:
            held = list(self._held.values())
        if not held:
            return
        now = self._clock.now()
        try:
            renewed: list[Lease | None] = self._store.renew_leases(
                [lease for lease, _ in held], self._ttl, now
            )
        except StoreError:
            renewed = [None if now >= lease.expires_at else lease for lease, _ in held]
        lost: list[Callable[[], None]] = []
        moved: list[tuple[Callable[[Lease], None], Lease]] = []
        with self._lock:
            for (lease, hooks), new in zip(held, renewed, strict=True):
                if self._held.get(lease.agent_id, (None,))[0] is not lease:
                    continue  # discarded (or re-added) while the round ran
                if new is None:
                    del self._held[lease.agent_id]
                    if hooks.on_lost is not None:
                        lost.append(hooks.on_lost)
                else:
                    self._held[lease.agent_id] = (new, hooks)
                    if hooks.on_renewed is not None and new is not lease:
                        moved.append((hooks.on_renewed, new))
        for on_lost in lost:
            on_lost()
        for on_renewed, new in moved:
            on_renewed(new)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
