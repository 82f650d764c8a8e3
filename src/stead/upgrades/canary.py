"""A spec's new version tried on a few of its agents first, then on the rest, or taken back.

:func:`canary` applies the new spec to ``count`` of the agents made from a spec
(the first by id, so a second run picks the same ones), watches them for ``watch``
seconds, and then applies it to the rest, or rolls the few back to the spec they
had (a ``spec_upgraded`` event marked ``rollback``, whose spec is the ``previous``
of the upgrade it undoes). A canary agent goes bad when its journal gains a
``violation`` after its upgrade, or it fails.

Its progress is the agents' journals, nothing else: each says which spec it has
and since when. So a ``stead upgrade`` killed half-way is run again as it was: the
agents already on the new spec are skipped, the watch ends ``watch`` seconds after
the newest canary upgrade (not after the second start), and the rest follow.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..journal import Event, Kind
from ..ports import RuntimePort
from ..spec import AgentSpec
from ..store.anchors import spec_digest
from ..store.base import AgentRecord
from .apply import new_record, planned, upgrade
from .plan import check

POLL_SECONDS = 1.0
"""How often the canaries' journals are looked at while they are watched."""


@dataclass(frozen=True, slots=True)
class CanaryReport:
    """What a canary did: ``outcome`` is ``applied`` or ``rolled_back``."""

    outcome: str
    canaries: list[str]
    rest: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "canaries": self.canaries, "rest": self.rest,
                "skipped": self.skipped, "why": self.why}  # fmt: skip


def agents_of(rt: RuntimePort, name: str) -> list[AgentRecord]:
    """The agents made from the spec called ``name`` that have not ended, by id."""
    found = []
    for summary in rt.store.list_agents(rt.tenant):
        record = rt.store.get_record(summary.agent_id)
        if record.spec.get("name") == name and summary.status not in (
            "completed",
            "failed",
            "cancelled",
        ):
            found.append(record)
    return sorted(found, key=lambda r: r.agent_id)


def _upgraded_at(events: list[Event], digest: str) -> Event | None:
    """The upgrade that gave the agent ``digest``, if that is the spec it has now."""
    last = next((e for e in reversed(events) if e.kind == Kind.SPEC_UPGRADED), None)
    return last if last is not None and last.data["to"] == digest else None


def _trouble(rt: RuntimePort, agent_id: str, since: int) -> str | None:
    """Why a canary agent has gone bad since event ``since``, or None."""
    state = rt.store.load_state(agent_id)
    if state.status == "failed":
        return f"agent {agent_id} failed ({state.status_reason})"
    for ev in rt.store.read_events(agent_id, since + 1):
        if ev.kind == Kind.VIOLATION:
            return f"agent {agent_id}: monitor {ev.data.get('rule')}: {ev.data.get('message')}"
    return None


def canary(
    rt: RuntimePort,
    name: str,
    spec: AgentSpec | Mapping[str, Any],
    *,
    count: int,
    watch: float,
    role: str = "admin",
    reason: str = "",
    sleep: Callable[[float], None] = time.sleep,
    wait: float = 0.0,
) -> CanaryReport:
    """Apply ``spec`` to ``count`` agents of the spec ``name``, watch them ``watch``
    seconds (by the runtime's clock), then apply it to the rest or roll them back."""
    tenant = spec.tenant if isinstance(spec, AgentSpec) else spec.get("tenant")
    agents = [a for a in agents_of(rt, name) if a.tenant == tenant]  # the spec's tenant's
    if not agents:
        raise UsageError(
            f"no agent of tenant {tenant} that has not ended was made from a spec named {name!r}"
        )
    if count < 1:
        raise UsageError("--canary takes the number of agents to try the new spec on first")
    new = {a.agent_id: new_record(spec, a, rt) for a in agents}
    for a in agents:  # every agent's plan is checked before any is changed
        check(planned(rt, a.agent_id, new[a.agent_id]), role)
    digest = spec_digest(next(iter(new.values())))
    events = {a.agent_id: rt.store.read_events_of_kinds(a.agent_id, (Kind.SPEC_UPGRADED,))
              for a in agents}  # fmt: skip
    canaries, rest = agents[:count], agents[count:]
    skipped = [a.agent_id for a in agents if _upgraded_at(events[a.agent_id], digest)]
    note = f"canary of {len(canaries)}" + (f": {reason}" if reason else "")
    for a in canaries:
        if a.agent_id not in skipped:
            upgrade(rt, a.agent_id, new[a.agent_id], role=role, reason=note, wait=wait,
                    sleep=sleep)  # fmt: skip
    marks = {}
    for a in canaries:
        ev = _upgraded_at(rt.store.read_events_of_kinds(a.agent_id, (Kind.SPEC_UPGRADED,)),
                          digest)  # fmt: skip
        if ev is not None:
            marks[a.agent_id] = ev
    ids = [a.agent_id for a in canaries]
    until = max((e.at for e in marks.values()), default=rt.clock.now()) + watch
    while True:
        bad = next((t for a, e in marks.items() if (t := _trouble(rt, a, e.seq))), None)
        if bad is not None:
            for agent_id in marks:
                previous = dict(marks[agent_id].data["previous"])
                upgrade(rt, agent_id, previous, role="admin", reason=f"canary rolled back: {bad}",
                        rollback=True, wait=max(wait, 60.0), sleep=sleep)  # fmt: skip
            return CanaryReport("rolled_back", ids, [], skipped, bad)
        if rt.clock.now() >= until:
            break
        sleep(min(POLL_SECONDS, max(0.0, until - rt.clock.now())))
    done = []
    for a in rest:
        if a.agent_id not in skipped:
            upgrade(rt, a.agent_id, new[a.agent_id], role=role, reason=f"after a {note}",
                    wait=wait, sleep=sleep)  # fmt: skip
            done.append(a.agent_id)
    return CanaryReport("applied", ids, done, skipped)
