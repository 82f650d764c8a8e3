"""A worker: runs every runnable agent in a store, many at a time.

The worker looks for agents whose status says there is work (``created`` or
``running``, or a timer that is due), runs each in its own activation on a pool
of threads, and groups their commits (:mod:`stead.store.groupcommit`). It asks the store's
index for them, so idle and hibernated agents cost it nothing. Agents that have
waited longer than ``hibernate_after`` seconds are hibernated at the end of
each pass. An agent another live worker holds is
skipped; one whose holder died on this host is taken over at once, which is
what brings a killed worker's agents back as soon as a new worker starts.

Threads, not processes: a step spends most of its time waiting for a commit or
a tool, and the commits are what grouping saves.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from ..errors import LeaseHeld, SteadError
from ..runtime.activation import Outcome
from ..runtime.leases import holder_is_dead_here, this_worker
from ..runtime.runtime import Runtime
from ..schedules.firing import FireReport, fire_due
from ..snapshots.hibernation import hibernate_idle
from ..store.base import Lease
from ..store.groupcommit import GroupCommitter
from ..store.schedule_rows import ScheduleRows


@dataclass(slots=True)
class WorkerReport:
    """What one pass over the store did."""

    ran: dict[str, str] = field(default_factory=dict)
    busy: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    hibernated: list[str] = field(default_factory=list)
    steps: int = 0
    commits: int = 0
    batches: int = 0


class Worker:
    """Runs a store's runnable agents with bounded concurrency and group commit."""

    def __init__(
        self,
        runtime: Runtime,
        concurrency: int = 32,
        tenant: str | None = None,
        on_outcome: Callable[[str, Outcome], None] | None = None,
        max_steps: int | None = None,
        hibernate_after: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if hibernate_after is not None and hibernate_after < 0:
            raise ValueError("hibernate_after must be 0 or more seconds")
        self.hibernate_after = hibernate_after
        self.runtime = runtime
        self.concurrency = concurrency
        self.tenant = tenant
        self.on_outcome = on_outcome
        self.on_start: Callable[[str], None] | None = None
        """Called with an agent's id as its activation starts (on the thread it runs on)."""
        self.on_error: Callable[[str, str], None] | None = None
        """Called with an agent's id and what went wrong when its activation failed."""
        self.max_steps = max_steps  # per activation, so one agent cannot hog a slot
        self.fired = FireReport()
        """What the schedules this worker fired came to (:mod:`stead.schedules.firing`)."""
        self._stop = threading.Event()
        self._adopted = False  # a dead process's leases on this host looked for yet

    def runnable(self) -> list[str]:
        return self.runtime.store.agents_to_run(self.runtime.clock.now(), self.tenant)

    def hibernate_idle(self, report: WorkerReport) -> None:
        """Hibernate agents that have waited longer than ``hibernate_after``."""
        if self.hibernate_after is not None:
            slept, failed = hibernate_idle(
                self.runtime, self.hibernate_after, self.tenant, self._stop.is_set
            )
            report.hibernated += slept
            report.errors |= failed

    def wait_for_work(self, poll: float, woken: threading.Event | None = None) -> bool:
        """Sleep until the store tells of new work, ``woken`` is set (by whoever made
        work in this process), the earliest timer falls due, or ``poll`` seconds
        pass; a :meth:`stop` ends it within a second."""
        store, now = self.runtime.store, self.runtime.clock.now()
        due = store.next_wake(self.tenant)  # a timer already due was this pass's
        fires = self._next_fire()
        if fires is not None:
            due = fires if due is None else min(due, fires)
        left = poll if due is None or due <= now else min(poll, due - now)
        # told in this process, the wait is cut to a tenth of a second
        slice_ = 1.0 if woken is None else 0.1
        while left > 0 and not self._stop.is_set():
            if woken is not None and woken.is_set():
                return True
            if store.wait_for_work(min(slice_, left)):
                return True
            left -= slice_
        return woken is not None and woken.is_set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Ask the worker to start no more agents; running ones end after the step they
        are in, their leases given back, and go on wherever they are run next."""
        self._stop.set()

    def run_until_idle(self, max_passes: int = 100) -> WorkerReport:
        """Run agents until none is left that this worker can run."""
        report = WorkerReport()
        committer = GroupCommitter(self.runtime.store, self.runtime.clock)
        try:
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="stead-agent") as pool:
                for _ in range(max_passes):
                    if self._stop.is_set():
                        break  # before claiming: a claim takes leases no one would run
                    leases = self.claim()
                    claimed = {lease.agent_id: lease for lease in leases or []}
                    # a store that claims said which are free: the others are held, or
                    # locked by a writer, and trying their leases would wait on them
                    todo = (
                        list(claimed)
                        if leases is not None
                        else [
                            a
                            for a in self.runnable()
                            if a not in report.busy and a not in report.errors
                        ]
                    )
                    if not todo:
                        break
                    futures = {
                        a: pool.submit(self._run_one, a, committer, claimed.get(a)) for a in todo
                    }
                    named = {future: agent_id for agent_id, future in futures.items()}
                    for future in as_completed(named):  # each outcome as its agent ends
                        self._collect(named[future], future, report)
        finally:
            committer.close()
            report.commits, report.batches = committer.commits, committer.batches
        self.hibernate_idle(report)
        return report

    def fire_schedules(self) -> None:
        """Fire the schedules that are due: the agents they wake are then claimed."""
        found = fire_due(self.runtime, tenant=self.tenant)
        self.fired.delivered += found.delivered
        self.fired.skipped += found.skipped
        self.fired.failed += found.failed
        self.fired.missed += found.missed
        for schedule_id, problem in found.errors.items():
            self.fired.errors[schedule_id] = problem
            if self.on_error is not None:
                self.on_error(schedule_id, problem)

    def _next_fire(self) -> float | None:
        rows = getattr(self.runtime.store, "inner", self.runtime.store)
        return rows.next_schedule_fire(self.tenant) if isinstance(rows, ScheduleRows) else None

    def claim(self, limit: int | None = None) -> list[Lease] | None:
        """Leases of up to ``limit`` (default: ``concurrency``) agents with work, taken
        for this worker (where the store claims), once the schedules due are fired."""
        if not self._stop.is_set():
            self.fire_schedules()
        rt = self.runtime
        owner = f"{this_worker()}:{time.monotonic_ns()}"
        most = self.concurrency if limit is None else limit
        leases = rt.store.claim(owner, rt.lease_ttl, rt.clock.now(), most, self.tenant)
        if leases is not None and not self._adopted:
            self._adopted = True
            leases += self._orphans(owner, most - len(leases))
        return leases

    def _orphans(self, owner: str, room: int) -> list[Lease]:
        """Leases of agents a dead process on this host held, taken over now. A claiming
        store hands out only lapsed leases, so a worker killed and started again on the
        same host would wait out its own old leases; where the store does not claim,
        :meth:`Activation.acquire` takes these over itself. Looked for at the first
        claim only: it reads every runnable agent's lease."""
        rt, found = self.runtime, list[Lease]()
        for agent_id in self.runnable():
            if len(found) >= room:
                break
            held, now = rt.store.get_lease(agent_id), rt.clock.now()
            if held is None or not held.live(now) or not holder_is_dead_here(held.owner):
                continue
            with contextlib.suppress(LeaseHeld):  # another worker here was quicker
                found.append(
                    rt.store.acquire_lease(agent_id, owner, rt.lease_ttl, now, takeover=held.owner)
                )
        return found

    def _run_one(
        self, agent_id: str, committer: GroupCommitter, lease: Lease | None = None
    ) -> Outcome | None:
        if self._stop.is_set():
            if lease is not None:  # claimed, not run: others may take it at once
                self.runtime.store.release_lease(lease)
            return None
        if self.on_start is not None:
            self.on_start(agent_id)
        return self.runtime.run(
            agent_id,
            committer=committer,
            max_steps=self.max_steps,
            owner=lease,  # the claim's lease, used as it is: taken once
            stop=self._stop.is_set,  # SIGTERM: each agent ends the step it is in
        )

    def _collect(self, agent_id: str, future: Future[Outcome | None], report: WorkerReport) -> None:
        try:
            outcome = future.result()
        except LeaseHeld:
            report.busy.append(agent_id)
            return
        except Exception as exc:  # one agent's failure must not stop the others
            report.errors[agent_id] = str(exc) if isinstance(exc, SteadError) else repr(exc)
            if self.on_error is not None:
                self.on_error(agent_id, report.errors[agent_id])
            return
        if outcome is None:
            return
        report.ran[agent_id] = outcome.state.status
        report.steps += outcome.steps
        if self.on_outcome is not None:
            self.on_outcome(agent_id, outcome)
