"""Group commit: many agents' steps made durable by one transaction.

A worker running many agents at once would otherwise pay one fsync per agent
per step. Each activation hands its batch to the committer and waits; the
committer takes every batch that is waiting, stores them with
:meth:`~stead.store.base.Store.append_many` (one transaction on SQLite), and
wakes each activation with its own outcome. An activation still never acts
before its batch is durable: it waits for the commit, only with company.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..clock import Clock
from ..errors import SteadError, StoreError
from .base import Batch, Store

MAX_GROUP = 1024


@dataclass(slots=True)
class _Request:
    batch: Batch
    done: threading.Event = field(default_factory=threading.Event)
    error: SteadError | None = None


class GroupCommitter:
    """Collects batches from many threads and commits them together."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._queue: list[_Request] = []
        self._cond = threading.Condition()
        self._closed = False
        self.commits = 0
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    def submit(self, batch: Batch) -> None:
        """Store ``batch``; return once it is durable, or raise why it was refused."""
        request = _Request(batch)
        with self._cond:
            if self._closed:
                raise StoreError("the group committer is closed; the worker is stopping")
            self._queue.append(request)
            self._cond.notify()
        request.done.wait()
        if request.error is not None:
            raise request.error

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
            try:
                results = self._store.append_many([r.batch for r in group], self._clock.now())
            except Exception as exc:  # the whole transaction failed: every batch failed
                failure = exc if isinstance(exc, SteadError) else StoreError(str(exc))
                results = [failure] * len(group)
            self.commits += 1
            self.batches += len(group)
            for request, error in zip(group, results, strict=True):
                request.error = error
                request.done.set()

    def close(self) -> None:
        """Commit what is queued, then stop."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()
