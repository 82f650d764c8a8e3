"""Firing schedules: what a worker does on each pass (``stead work``, ``stead serve``).

:func:`fire_due` claims the schedules that are due (or have firings still to
deliver), works out which due times to fire under each one's catch-up policy,
records them (once: :meth:`~stead.store.schedule_rows.ScheduleRows.record_firings`
is a compare-and-set), and delivers them (:mod:`stead.schedules.delivery`).
Due times that passed while no worker ran, later than the schedule's
``grace``, are *late*: ``catch_up: skip`` fires none of them, ``one`` the latest,
``all`` the latest ``max_catch_up``; the ones left out are recorded as one
``missed`` firing with their count. At most :data:`LOOKED_AT` due times are
counted one by one; past that, the schedule goes on from the next due time
after now.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..errors import SteadError
from ..ids import new_id
from ..runtime.leases import this_worker
from ..store.schedule_rows import FiringRow, ScheduleRecord, ScheduleRows
from .book import definition_of, rows_of
from .cron import parse_cron
from .definition import Definition
from .delivery import deliver

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime

LOOKED_AT = 10_000
"""How many past due times a claim counts one by one (an every-second schedule
after a long outage is not walked through second by second)."""
CLAIMED = 50
"""How many schedules one pass claims."""
CLAIM_HOLD = 10.0
"""How long a pass's claim keeps other workers off its schedules. Every write it
then makes checks the claim, so a pass that outlives it changes nothing; a worker
killed mid-pass holds its schedules up for this long."""


@dataclass(slots=True)
class FireReport:
    """What one pass did: (schedule, due, agent) delivered, and the rest by schedule."""

    delivered: list[tuple[str, float, str | None]] = field(default_factory=list)
    skipped: list[tuple[str, float, str]] = field(default_factory=list)
    missed: int = 0
    failed: list[tuple[str, float, str]] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


def fire_due(
    rt: Runtime, *, tenant: str | None = None, owner: str | None = None, limit: int = CLAIMED
) -> FireReport:
    """Fire and deliver what is due now (see the module's docstring)."""
    rows = rows_of(rt.store)
    now = rt.clock.now()
    claim = owner or f"{this_worker()}:sched:{time.monotonic_ns()}"
    report = FireReport()
    claimed = rows.claim_schedules(claim, now, CLAIM_HOLD, limit, tenant or rt.tenant)
    try:
        for record in claimed:
            try:
                if not record.paused and record.fire_at is not None and record.fire_at <= now:
                    _record_due(rt, rows, claim, record, now, report)
                _deliver_pending(rt, rows, claim, record.schedule_id, report)
            except SteadError as exc:  # one schedule's trouble is not the others'
                report.errors[record.schedule_id] = str(exc)
    finally:
        rows.release_schedules(claim, [r.schedule_id for r in claimed])
    return report


def plan(
    definition: Definition, schedule_id: str, next_due: float, now: float
) -> tuple[list[float], list[float], int, float | None]:
    """The due times to fire at ``now``, the late ones left out (the first few) and
    how many, and the next due time after them."""
    cron = parse_cron(definition.cron) if definition.cron is not None else None
    dues: list[float] = []
    due: float | None = next_due
    while due is not None and definition.fire_time(schedule_id, due) <= now:
        if len(dues) == LOOKED_AT:  # the rest are counted as one more, then skipped over
            due = definition.after(now, cron)
            break
        dues.append(due)
        due = definition.after(due, cron)
    on_time = [d for d in dues if now - definition.fire_time(schedule_id, d) <= definition.grace]
    timely = set(on_time)
    late = [d for d in dues if d not in timely]
    if definition.catch_up == "all":
        fire = (late + on_time)[-definition.max_catch_up :]
    elif definition.catch_up == "one" and late and not on_time:
        fire = late[-1:]
    else:
        fire = on_time
    fired = set(fire)
    left = [d for d in dues if d not in fired]
    return fire, left, len(left) + (1 if len(dues) == LOOKED_AT else 0), due


def _record_due(
    rt: Runtime, rows: ScheduleRows, claim: str, record: ScheduleRecord, now: float,
    report: FireReport,
) -> None:  # fmt: skip
    definition = definition_of(record)
    assert record.next_due is not None
    fire, left, count, next_due = plan(definition, record.schedule_id, record.next_due, now)
    fresh = record.agent_id is None
    firings = [
        FiringRow(record.schedule_id, due, record.tenant, "pending", 1,
                  new_id("ag", rt.clock) if fresh else record.agent_id, "", now)
        for due in fire
    ]  # fmt: skip
    if left:
        firings.append(FiringRow(
            record.schedule_id, left[0], record.tenant, "missed", count, record.agent_id,
            f"{count} due time(s) passed while no worker ran; catch_up is {definition.catch_up}",
            now, now,
        ))  # fmt: skip
    fire_at = None if next_due is None else definition.fire_time(record.schedule_id, next_due)
    if rows.record_firings(claim, record.schedule_id, record.next_due, next_due, fire_at, firings):
        report.missed += count if left else 0


def _deliver_pending(
    rt: Runtime, rows: ScheduleRows, claim: str, schedule_id: str, report: FireReport
) -> None:
    for firing in rows.pending_firings(schedule_id):
        record = rows.get_schedule(schedule_id)
        if record is None:
            return
        outcome = deliver(rt, record, firing)
        if outcome is None:  # queued behind the previous run: later firings wait too
            report.waiting.append(schedule_id)
            return
        settled = replace(firing, agent_id=outcome.agent_id)
        if not rows.settle_firing(claim, settled, outcome.state, outcome.detail, rt.clock.now()):
            return  # the claim lapsed: whoever holds it now goes on
        if outcome.state == "delivered":
            report.delivered.append((schedule_id, firing.due, outcome.agent_id))
        elif outcome.state == "skipped":
            report.skipped.append((schedule_id, firing.due, outcome.detail))
        else:
            report.failed.append((schedule_id, firing.due, outcome.detail))
        if outcome.ends:  # its agent is gone or finished: it fires no more
            rows.set_schedule_time(schedule_id, True, None, None)
