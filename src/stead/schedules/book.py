"""Schedules as people make and change them: the Python API behind the CLI and HTTP.

A schedule is authority, like a grant: it makes an agent act at a time no
person is there to watch. So it is made by a person (the runtime's
:attr:`~stead.runtime.runtime.Runtime.person`), and a schedule that wakes an
existing agent is journaled in that agent's journal (``schedule_set``, with
the digest of everything it says) before its row is stored: a worker fires
only a schedule whose row still has that digest and that the journal has not
paused or removed (:mod:`stead.schedules.delivery`). What the woken agent then
does is judged by its grants at that time, like any other call: a schedule
carries no authority of its own beyond the message its maker wrote.

A schedule of fresh agents (``spec=``) makes a new agent from the spec for
each run, checked as ``stead create`` checks it, in the spec's tenant.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..canonical import dumps, sha256_hex
from ..errors import NotFound, SteadError, UsageError
from ..ids import check_id, new_id
from ..journal import Kind, NewEvent
from ..spec import AgentSpec
from ..store.schedule_rows import FiringRow, ScheduleRecord, ScheduleRows
from .definition import Definition, from_json, parse_definition

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime


def rows_of(store: object) -> ScheduleRows:
    """The schedule rows of ``store`` (a tenant's view is looked through)."""
    inner = getattr(store, "inner", store)
    if not isinstance(inner, ScheduleRows):
        raise UsageError(f"{type(inner).__name__} keeps no schedules")
    return inner


def digest_of(record: ScheduleRecord) -> str:
    """The digest of what a schedule says: its id, tenant, agent, definition, spec,
    maker and time made (what the agent's journal holds)."""
    body = {k: v for k, v in record.body.items() if k != "digest"}
    return sha256_hex(dumps({"schedule_id": record.schedule_id, "tenant": record.tenant,
                             "agent_id": record.agent_id, **body}))  # fmt: skip


def definition_of(record: ScheduleRecord) -> Definition:
    return from_json(record.body["definition"])


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A schedule as people are shown it: its row, its definition, its next due times."""

    record: ScheduleRecord
    definition: Definition
    upcoming: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {
            "schedule_id": r.schedule_id, "tenant": r.tenant, "agent_id": r.agent_id,
            "spec": (r.body.get("spec") or {}).get("name"), "when": self.definition.when(),
            "definition": self.definition.to_json(), "made_by": r.body.get("made_by"),
            "made_at": r.body.get("made_at"), "paused": r.paused, "next_due": r.next_due,
            "fire_at": r.fire_at, "upcoming": self.upcoming, "runs": r.runs,
            "pending": r.pending, "last_run": r.last_run,
        }  # fmt: skip


class Schedules:
    """A runtime's schedules (see the module's docstring).

    ``Schedules(runtime).add(agent_id=..., every="1h", message="...")`` wakes an
    agent every hour; ``add(spec=spec, cron="0 9 * * mon-fri", tz="Europe/Paris")``
    makes a fresh agent from ``spec`` every weekday at nine. A worker
    (``stead work``, ``stead serve``) fires them; :func:`stead.schedules.firing.fire_due`
    does it for a program that runs its own.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.rows = rows_of(runtime.store)

    # -- reading ------------------------------------------------------------------

    def get(self, schedule_id: str) -> ScheduleRecord:
        """The schedule, or :class:`NotFound` (also for another tenant's)."""
        check_id(schedule_id, "schedule id")
        found = self.rows.get_schedule(schedule_id)
        if found is None or self.rt.tenant not in (None, found.tenant):
            raise NotFound(f"no schedule {schedule_id}; `stead schedule ls` lists them")
        return found

    def list(self, agent_id: str | None = None) -> list[ScheduleRecord]:
        return self.rows.list_schedules(self.rt.tenant, agent_id)

    def view(self, record: ScheduleRecord, count: int = 3) -> ScheduleView:
        """The schedule with its next ``count`` due times (none while paused)."""
        definition = definition_of(record)
        upcoming: list[float] = []
        if not record.paused and record.next_due is not None:
            upcoming = [record.next_due, *definition.upcoming(record.next_due, count - 1)]
        return ScheduleView(record, definition, upcoming[:count])

    def firings(self, schedule_id: str, limit: int = 20) -> builtins.list[FiringRow]:
        return self.rows.firings(self.get(schedule_id).schedule_id, limit)

    # -- making and changing ------------------------------------------------------

    def add(
        self,
        *,
        agent_id: str | None = None,
        spec: AgentSpec | None = None,
        **fields: Any,
    ) -> ScheduleRecord:
        """Make a schedule that wakes ``agent_id``, or makes a fresh agent from ``spec``
        per run; ``fields`` are the definition's (:mod:`stead.schedules.definition`)."""
        if (agent_id is None) == (spec is None):
            raise UsageError("a schedule wakes an agent or makes one from a spec: give one of them")
        now = self.rt.clock.now()
        definition = parse_definition(fields, now=now, for_spec=spec is not None)
        schedule_id = new_id("sch", self.rt.clock)
        body: dict[str, Any] = {"definition": definition.to_json(), "made_by": self.rt.person(),
                                "made_at": now}  # fmt: skip
        if spec is not None:
            tenant = spec.tenant
            if self.rt.tenant not in (None, tenant):
                raise UsageError(
                    f"the spec is for tenant {tenant!r}; this runtime acts for {self.rt.tenant!r}"
                )
            self.rt.check_loads(spec)  # refused now, not at every firing
            body["spec"] = spec.to_record()
        else:
            assert agent_id is not None
            tenant = self.rt.store.get_record(agent_id).tenant  # NotFound for another tenant's
        due = definition.after(now)
        fire_at = None if due is None else definition.fire_time(schedule_id, due)
        record = ScheduleRecord(schedule_id, tenant, agent_id, body, due, fire_at)
        body["digest"] = digest_of(record)
        record = ScheduleRecord(schedule_id, tenant, agent_id, body, due, fire_at)
        if agent_id is not None:
            # the journal first: a row it does not hold would wake nothing
            self._journal(agent_id, Kind.SCHEDULE_SET, schedule_id=schedule_id,
                          digest=record.body["digest"], when=definition.when())  # fmt: skip
        self.rows.put_schedule(record)
        return record

    def pause(self, schedule_id: str) -> ScheduleRecord:
        """Fire nothing more until resumed (a firing already recorded is still delivered)."""
        return self._set(schedule_id, paused=True)

    def resume(self, schedule_id: str) -> ScheduleRecord:
        """Fire again from the next due time after now (what fell due while paused is not
        caught up)."""
        return self._set(schedule_id, paused=False)

    def remove(self, schedule_id: str) -> None:
        record = self.get(schedule_id)
        if record.agent_id is not None:
            self._journal_change(record, "removed")
        self.rows.delete_schedule(schedule_id)

    def _set(self, schedule_id: str, *, paused: bool) -> ScheduleRecord:
        record = self.get(schedule_id)
        if record.agent_id is not None:
            self._journal_change(record, "paused" if paused else "resumed")
        due: float | None = None
        fire_at: float | None = None
        if not paused:
            definition = definition_of(record)
            due = definition.after(self.rt.clock.now())
            fire_at = None if due is None else definition.fire_time(schedule_id, due)
        self.rows.set_schedule_time(schedule_id, paused, due, fire_at)
        return self.get(schedule_id)

    def _journal_change(self, record: ScheduleRecord, change: str) -> None:
        assert record.agent_id is not None
        try:
            self._journal(record.agent_id, Kind.SCHEDULE_CHANGED,
                          schedule_id=record.schedule_id, change=change)  # fmt: skip
        except NotFound:
            if change != "removed":  # a schedule of a deleted agent can still be removed
                raise

    def _journal(self, agent_id: str, kind: Kind, **data: Any) -> None:
        def build(state: Any) -> list[NewEvent]:
            if state.is_final and kind == Kind.SCHEDULE_SET:
                raise SteadError(f"agent {agent_id} is {state.status}; nothing would wake it")
            return [NewEvent(kind, {**data, "by": self.rt.person()})]

        self.rt.append_as_person(agent_id, build)


def check_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The definition's fields of ``raw`` (a body, flags), without the target's."""
    return {k: v for k, v in raw.items() if k not in ("agent_id", "spec", "spec_file")}
