"""A worker that keeps thousands of agents in flight: each parked while its model thinks.

The threaded worker (:class:`~stead.workers.threaded.Worker`) gives every agent it
runs a thread for the whole activation, and another for its lease's heartbeat;
an agent whose model takes a second to answer holds both for that second, so
the agents in flight are bounded by the threads a process can keep. Here an
activation is a :data:`~stead.runtime.steps.Machine` (``Runtime.activate``): it
runs on one of a few threads only while it has work for the processor, the
store or a tool, from its lease to its first question for the model and from
each answer to the next question. While the model thinks it is parked: its
request waits on one event loop over one shared aiohttp session, and its
lease is renewed with every other one by one :class:`~stead.runtime.heartbeat.
Heartbeats` thread, in one store call. Commits are grouped across agents as in
the threaded worker. A model that cannot ask on an event loop (scripted,
replayed, recorded) is asked in the thread, as the threaded worker does.

Agents are claimed as room frees up (at most ``in_flight`` at once); a pass
ends when none is running and none is left to claim. A tool call still runs in
its thread: many long tool calls at once wait for threads (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx

from ..errors import LeaseHeld, SteadError
from ..models.http import read_proxies
from ..runtime.activation import Outcome
from ..runtime.heartbeat import Heartbeats
from ..runtime.runtime import Runtime
from ..runtime.steps import Ask, Machine, answered
from ..store.base import Lease
from ..store.groupcommit import GroupCommitter
from .threaded import Worker, WorkerReport

if TYPE_CHECKING:
    import aiohttp

CLAIM_EVERY = 0.05
"""Seconds between looks for more work while agents are in flight and room is free."""

Ended = tuple[str, Outcome | None, BaseException | None]


class ParkedWorker(Worker):
    """Runs up to ``in_flight`` agents at once on ``threads`` threads, parking each
    while its model answers; otherwise a :class:`~stead.workers.threaded.Worker`."""

    def __init__(
        self,
        runtime: Runtime,
        in_flight: int = 1000,
        threads: int = 16,
        tenant: str | None = None,
        on_outcome: Callable[[str, Outcome], None] | None = None,
        max_steps: int | None = None,
        hibernate_after: float | None = None,
    ) -> None:
        super().__init__(runtime, in_flight, tenant, on_outcome, max_steps, hibernate_after)
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.threads = threads

    def run_until_idle(self, max_passes: int = 100) -> WorkerReport:
        report = WorkerReport()
        rt = self.runtime
        ended: queue.Queue[Ended] = queue.Queue()
        committer = GroupCommitter(rt.store, rt.clock)
        heartbeats = Heartbeats(rt.store, rt.lease_ttl, rt.clock)
        loop = asyncio.new_event_loop()
        looping = threading.Thread(target=loop.run_forever, name="stead-models", daemon=True)
        looping.start()
        session = asyncio.run_coroutine_threadsafe(model_session(), loop).result()
        flight = _Flight(self, session, loop, ended, committer, heartbeats)
        try:
            with ThreadPoolExecutor(self.threads, thread_name_prefix="stead-agent") as pool:
                flight.pool = pool
                running: set[str] = set()
                claims = 0
                looked_at = float("-inf")
                while True:
                    room = self.concurrency - len(running)
                    due = time.monotonic() - looked_at >= CLAIM_EVERY or not running
                    if room > 0 and due and claims < max_passes and not self._stop.is_set():
                        looked_at = time.monotonic()
                        started = self._start(flight, running, report, room)
                        claims += 1 if started or not running else 0
                    if not running:
                        break
                    try:
                        agent_id, outcome, exc = ended.get(timeout=CLAIM_EVERY)
                    except queue.Empty:
                        continue
                    running.discard(agent_id)
                    self._ended(agent_id, outcome, exc, report)
        finally:
            asyncio.run_coroutine_threadsafe(session.close(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
            looping.join(timeout=10)
            loop.close()
            heartbeats.close()
            committer.close()
            report.commits, report.batches = committer.commits, committer.batches
        self.hibernate_idle(report)
        return report

    def _start(self, flight: _Flight, running: set[str], report: WorkerReport, room: int) -> int:
        leases = self.claim(room)
        todo: list[tuple[str, Lease | None]]
        if leases is not None:
            todo = [(lease.agent_id, lease) for lease in leases]
        else:  # a store that does not claim: its leases are tried one by one
            seen = running | set(report.busy) | set(report.errors) | set(report.ran)
            todo = [(a, None) for a in self.runnable() if a not in seen]
            del todo[room:]
        for agent_id, lease in todo:
            running.add(agent_id)
            flight.start(agent_id, lease)
        return len(todo)

    def _ended(
        self,
        agent_id: str,
        outcome: Outcome | None,
        exc: BaseException | None,
        report: WorkerReport,
    ) -> None:
        if isinstance(exc, LeaseHeld):
            report.busy.append(agent_id)
        elif exc is not None:  # one agent's failure must not stop the others
            report.errors[agent_id] = str(exc) if isinstance(exc, SteadError) else repr(exc)
            if self.on_error is not None:
                self.on_error(agent_id, report.errors[agent_id])
        elif outcome is not None:
            report.ran[agent_id] = outcome.state.status
            report.steps += outcome.steps
            if self.on_outcome is not None:
                self.on_outcome(agent_id, outcome)


async def model_session() -> aiohttp.ClientSession:
    import aiohttp  # here, not at the top: every `stead` command would pay for it

    """The worker's one session for every agent's requests (made on its event loop).
    No cookies: a service could set one on an agent's answer that another agent's
    requests would then carry. Certificates are checked as the threaded worker's
    httpx does (its CA bundle), and proxies come from the environment likewise."""

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=httpx.create_ssl_context()),
        cookie_jar=aiohttp.DummyCookieJar(),
    )
    read_proxies(session)  # once, not at every request (trust_env would)
    return session


class _Flight:
    """The agents of one :meth:`ParkedWorker.run_until_idle`: each advanced on the pool
    until it asks a model, then parked on the event loop until the answer comes."""

    pool: ThreadPoolExecutor

    def __init__(
        self,
        worker: ParkedWorker,
        session: aiohttp.ClientSession,
        loop: asyncio.AbstractEventLoop,
        ended: queue.Queue[Ended],
        committer: GroupCommitter,
        heartbeats: Heartbeats,
    ) -> None:
        self.worker = worker
        self.session = session
        self.loop = loop
        self.ended = ended
        self.committer = committer
        self.heartbeats = heartbeats

    def start(self, agent_id: str, lease: Lease | None) -> None:
        self.pool.submit(self._begin, agent_id, lease)

    def _begin(self, agent_id: str, lease: Lease | None) -> None:
        worker = self.worker
        if worker.stopping:
            if lease is not None:  # claimed, not run: others may take it at once
                worker.runtime.store.release_lease(lease)
            self.ended.put((agent_id, None, None))
            return
        if worker.on_start is not None:
            worker.on_start(agent_id)
        try:
            machine = worker.runtime.activate(
                agent_id,
                committer=self.committer,
                max_steps=worker.max_steps,
                owner=lease,  # the claim's lease, used as it is: taken once
                stop=lambda: worker.stopping,
                heartbeats=self.heartbeats,
            )
        except BaseException as exc:
            self.ended.put((agent_id, None, exc))
            return
        self._advance(agent_id, machine, lambda: next(machine))

    def _advance(self, agent_id: str, machine: Machine[Outcome], step: Callable[[], Ask]) -> None:
        """Run ``machine`` on this thread until it asks a model that can answer on the
        event loop (then park it there) or ends."""
        try:
            ask = step()
            while (adecide := getattr(ask.model, "adecide", None)) is None:
                ask = answered(machine, ask)
        except StopIteration as done:
            self.ended.put((agent_id, done.value, None))
            return
        except BaseException as exc:
            machine.close()
            self.ended.put((agent_id, None, exc))
            return
        answer = asyncio.run_coroutine_threadsafe(adecide(ask.context, self.session), self.loop)
        answer.add_done_callback(lambda got: self._answered(agent_id, machine, got))

    def _answered(self, agent_id: str, machine: Machine[Outcome], got: Future[Any]) -> None:
        exc = got.exception()

        def step() -> Ask:
            return machine.throw(exc) if exc is not None else machine.send(got.result())

        self.pool.submit(self._advance, agent_id, machine, step)
