"""The server's own workers: what runs an agent on after an approval, a message, a
timer or a new agent made over HTTP.

``stead serve`` runs its store's agents itself unless told ``--workers 0`` (a
server beside separate ``stead work`` processes). The first worker is a
:class:`~stead.workers.parked.ParkedWorker` on a thread of the server's own
process, so that what it runs can be watched live by the page and the API;
each further one is a ``stead work --forever`` child the server supervises:
started with it, started again (after a pause that grows while it keeps
dying) if it dies, and stopped with SIGTERM when the server stops.

The in-process worker is woken at once by :meth:`ServerWorkers.nudge`, which
the server calls after every write a request makes; work given by another
process (``stead approve`` on the same SQLite file) is found at the next look,
``poll`` seconds at most, or at once where the store tells (PostgreSQL).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from ..errors import StoreUnusable
from ..workers.threaded import WorkerReport

_log = logging.getLogger("stead.server")

RESTART_PAUSES = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds before a dead child worker is started again: longer while it keeps dying."""
STEADY = 60.0
"""A child that ran this long before it died is started again after the first pause."""


class Runnable(Protocol):
    """What :class:`ServerWorkers` needs of a worker (a ``ParkedWorker``)."""

    def run_until_idle(self, max_passes: int = 100) -> WorkerReport: ...

    def wait_for_work(self, poll: float, woken: threading.Event | None = None) -> bool: ...

    def stop(self) -> None: ...

    @property
    def stopping(self) -> bool: ...


class ServerWorkers:
    """The in-process worker's thread and the supervised children, started and
    stopped together."""

    def __init__(
        self,
        worker: Runnable | None,
        children: int = 0,
        child_command: Sequence[str] = (),
        poll: float = 1.0,
        deliver: Callable[[], object] | None = None,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.worker = worker
        self.poll = poll
        self.deliver = deliver  # webhooks, on a thread of their own: a slow receiver
        self._close = close  # delays no agent
        self._woken = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._delivering: threading.Thread | None = None
        self._children = [_Child(list(child_command), self._stopped) for _ in range(children)]

    @property
    def count(self) -> int:
        """How many workers run the store's agents here (0: someone else must)."""
        return (self.worker is not None) + len(self._children)

    def start(self) -> None:
        if self.worker is not None:
            self._thread = threading.Thread(target=self._loop, name="stead-serve-worker")
            self._thread.start()
        if self.deliver is not None:
            self._delivering = threading.Thread(target=self._deliver, name="stead-webhooks")
            self._delivering.start()
        for child in self._children:
            child.start()

    def nudge(self) -> None:
        """There may be work: look for it now rather than at the next poll."""
        self._woken.set()

    def _loop(self) -> None:
        worker = self.worker
        assert worker is not None
        while not worker.stopping:
            self._woken.clear()  # what is nudged from here on is found by this pass
            try:
                worker.run_until_idle()
            except StoreUnusable as exc:
                # a restart or a cut link: what was committed stays; look again soon
                _log.warning("the store cannot be used now (%s); trying again", exc)
                self._stopped.wait(min(self.poll, 1.0))
                continue
            except Exception:  # the server goes on serving; the log tells the operator
                _log.exception("the server's worker failed a pass; trying again")
                self._stopped.wait(min(self.poll, 1.0))
                continue
            if not worker.stopping:
                worker.wait_for_work(self.poll, self._woken)

    def _deliver(self) -> None:
        assert self.deliver is not None
        while not self._stopped.is_set():
            try:
                self.deliver()
            except Exception:  # a store that cannot be used now: the next look tries again
                _log.exception("webhook delivery failed a pass; trying again")
            self._stopped.wait(max(self.poll, 1.0))

    def stop(self, timeout: float = 30.0) -> None:
        """Start no more agents; running ones end the step they are in, their leases
        given back. Children are sent SIGTERM, which does the same for theirs."""
        self._stopped.set()
        if self.worker is not None:
            self.worker.stop()
        for child in self._children:
            child.terminate()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._delivering is not None:
            self._delivering.join(timeout)
        if self._close is not None:
            self._close()
            self._close = None
        for child in self._children:
            child.wait(timeout)


class _Child:
    """One supervised ``stead work --forever`` process."""

    def __init__(self, command: list[str], stopped: threading.Event) -> None:
        self.command = command
        self.stopped = stopped
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name="stead-serve-child")

    def start(self) -> None:
        self._thread.start()

    def _supervise(self) -> None:
        deaths = 0
        while not self.stopped.is_set():
            began = time.monotonic()
            with self._lock:
                if self.stopped.is_set():
                    return
                self.process = subprocess.Popen([sys.executable, "-m", "stead", *self.command])
            code = self.process.wait()
            if self.stopped.is_set():
                return
            deaths = 0 if time.monotonic() - began >= STEADY else deaths + 1
            pause = RESTART_PAUSES[min(max(deaths - 1, 0), len(RESTART_PAUSES) - 1)]
            _log.warning(
                "a worker of this server (pid %s) ended with %s; starting another in %.0f s",
                self.process.pid, code, pause,
            )  # fmt: skip
            self.stopped.wait(pause)

    def terminate(self) -> None:
        with self._lock:
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()

    def wait(self, timeout: float) -> None:
        self._thread.join(timeout)
        process = self.process
        if process is not None and process.poll() is None:
            process.kill()  # it did not end its step in time: its agents' leases lapse
            process.wait()
