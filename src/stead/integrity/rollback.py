"""Rollback: undo what happened after a version, or what depended on a bad result.

Nothing is deleted: the journal keeps everything, and the rollback and each
compensation are journal events of their own.

``to_version``
    Every ``effectful`` call that completed after the version is compensated,
    newest first, with its tool's ``compensate`` hook (``hook(args, result,
    ctx)``); a call whose tool has none is listed for a person
    (``compensation_needed``). The workspace is restored to the version's
    manifest, and the agent's memory, goals, messages and recent calls become
    what they were then (its authority does not: grants, autonomy and approvals
    stay as they are now). The version must lie between two steps.
``downstream_of``
    Only the calls downstream of the result (see :mod:`stead.integrity.provenance`)
    are compensated, and only the workspace files that those calls alone
    changed are put back as they were before the first of them; independent
    later work is kept. A quarantine of that result is closed by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, ToolError, UsageError
from ..journal import Event, Kind
from ..snapshots.hibernation import refuse_while_hibernated
from ..tools.base import Tool, describe_failure, jsonable
from .provenance import Graph

if TYPE_CHECKING:
    from ..ports import AgentPort, RuntimePort

RESTORED_FIELDS = ("memory", "goals", "inbox", "recent_calls", "calls_total", "finish")


@dataclass(slots=True)
class RollbackReport:
    compensated: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    needs_person: list[str] = field(default_factory=list)
    restored_paths: list[str] = field(default_factory=list)


def _completed_effects(events: list[Event], after: int) -> list[dict[str, Any]]:
    """Effectful calls recorded after ``after`` that completed, oldest first."""
    intents: dict[str, Event] = {}
    compensated = {e.data["call_id"] for e in events if e.kind == Kind.COMPENSATED}
    done: list[dict[str, Any]] = []
    for ev in events:
        d = ev.data
        if ev.kind == Kind.TOOL_INTENT and d.get("effect") == "effectful":
            intents[d["call_id"]] = ev
        elif ev.kind in (Kind.TOOL_RESULT, Kind.CALL_RESOLVED) and d["call_id"] in intents:
            ok = d.get("ok") if ev.kind == Kind.TOOL_RESULT else d["resolution"] == "done"
            intent = intents.pop(d["call_id"])
            if ok and intent.seq > after and d["call_id"] not in compensated:
                done.append({**intent.data, "output": d.get("output"), "seq": intent.seq})
    return done


def rollback(
    rt: RuntimePort,
    agent_id: str,
    *,
    to_version: int | None = None,
    downstream_of: int | None = None,
    tools: Mapping[str, Tool] | None = None,
) -> RollbackReport:
    """Undo what came after a version, or downstream of a result; see the module doc.

    ``tools`` are the agent's tools (default: those its spec names), whose
    ``compensate`` hooks undo their calls.
    """
    if (to_version is None) == (downstream_of is None):
        raise UsageError("give exactly one of --to VERSION or --downstream-of EVENT")
    record = rt.store.get_record(agent_id)
    with rt.hold(agent_id, tools if tools is not None else _spec_tools(rt, record)) as act:
        refuse_while_hibernated(act.state, "roll it back")
        events = list(rt.store.read_events(agent_id))
        report = RollbackReport()
        if to_version is not None:
            _check_version(act, to_version)
            calls = _completed_effects(events, to_version)
            _compensate(act, calls, report)
            _unknown_for_a_person(act, report)
            _restore_version(act, to_version, report)
        else:
            assert downstream_of is not None
            try:
                downstream = {n.seq for n in Graph(events).impact(downstream_of)}
            except KeyError:
                raise NotFound(f"agent {agent_id} has no event {downstream_of}") from None
            calls = [c for c in _completed_effects(events, 0) if c["seq"] in downstream]
            _compensate(act, calls, report)
            _restore_downstream(act, events, downstream, downstream_of, report, rt.person())
        act.flush()
        return report


def _check_version(act: AgentPort, version: int) -> None:
    latest = act.state.version
    if not 1 <= version < latest:
        raise UsageError(
            f"agent {act.record.agent_id} has versions 1 to {latest}; "
            f"roll back to one before {latest}"
        )
    past = act.store.state_at(act.record.agent_id, version)
    if past.inflight is not None:
        raise UsageError(
            f"version {version} is in the middle of step {past.inflight['step']}; roll back "
            "to a version between steps (see `stead trace`: after a step_completed event)"
        )


def _compensate(act: AgentPort, calls: list[dict[str, Any]], report: RollbackReport) -> None:
    for call in reversed(calls):  # newest first, as effects are usually layered
        tool = act.tools.get(call["tool"])
        if tool is None or tool.compensate is None:
            act.emit(
                Kind.COMPENSATION_NEEDED,
                call_id=call["call_id"],
                tool=call["tool"],
                args=call["args"],
                reason=f"{call['tool']} has no compensate hook; a person must undo it",
            )
            report.needs_person.append(call["call_id"])
            continue
        act.flush()  # what was compensated before is durable before the next effect
        try:
            out = tool.compensate(
                dict(call["args"]), call.get("output"), act.ctx_for(call["call_id"], tool=tool)
            )
            act.emit(
                Kind.COMPENSATED,
                call_id=call["call_id"],
                tool=call["tool"],
                ok=True,
                output=jsonable(out),
            )
            report.compensated.append(call["call_id"])
        except Exception as exc:  # a failed undo is for a person to finish
            act.emit(
                Kind.COMPENSATED,
                call_id=call["call_id"],
                tool=call["tool"],
                ok=False,
                error=describe_failure(exc),
            )
            report.failed.append(call["call_id"])
        act.flush()


def _unknown_for_a_person(act: AgentPort, report: RollbackReport) -> None:
    for call_id, call in sorted(act.state.unknown.items()):
        act.emit(
            Kind.COMPENSATION_NEEDED,
            call_id=call_id,
            tool=call.get("tool"),
            args=call.get("args"),
            reason="its outcome is unknown; a person must check whether it happened and undo it",
        )
        report.needs_person.append(call_id)


def _restore_version(act: AgentPort, version: int, report: RollbackReport) -> None:
    past = act.store.state_at(act.record.agent_id, version)
    delta = act.workspace.restore(past.manifest)
    report.restored_paths = delta.paths()
    act.emit(
        Kind.ROLLED_BACK,
        to_version=version,
        restored={f: getattr(past, f) for f in RESTORED_FIELDS},
        manifest=past.manifest,
        paths=delta.paths(),
        compensated=report.compensated,
        needs_person=report.needs_person + report.failed,
    )
    act.manifest = dict(past.manifest)


def _restore_downstream(
    act: AgentPort,
    events: list[Event],
    downstream: set[int],
    source: int,
    report: RollbackReport,
    who: str,
) -> None:
    """Put back the files only downstream calls changed, as they were before the first."""
    touched_by: dict[str, set[bool]] = {}
    first: int | None = None
    for ev in events:
        if ev.kind != Kind.TOOL_RESULT:
            continue
        paths = [*(ev.data.get("changed") or {}), *(ev.data.get("removed") or [])]
        is_down = ev.seq in downstream
        if is_down and paths and first is None:
            first = ev.seq
        for p in paths:
            if first is not None:
                touched_by.setdefault(p, set()).add(is_down)
    manifest = dict(act.state.manifest)
    if first is not None:
        before = act.store.state_at(act.record.agent_id, first - 1).manifest
        for path, kinds in touched_by.items():
            if kinds == {True}:  # only downstream calls touched it: the dependency is clear
                if path in before:
                    manifest[path] = before[path]
                else:
                    manifest.pop(path, None)
    delta = act.workspace.restore(manifest)
    report.restored_paths = delta.paths()
    act.emit(
        Kind.ROLLED_BACK,
        downstream_of=source,
        manifest=manifest,
        paths=delta.paths(),
        compensated=report.compensated,
        needs_person=report.needs_person + report.failed,
    )
    act.manifest = manifest
    for vid, v in sorted(act.state.violations.items()):
        if v["rule"] == "quarantine" and v["events"] and v["events"][0] == source:
            act.emit(
                Kind.VIOLATION_CLEARED,
                violation_id=vid,
                by=who,
                reason="what it fed was rolled back",
            )


def _spec_tools(rt: RuntimePort, record: Any) -> dict[str, Tool]:
    try:
        return rt.tools_for(record)
    except ToolError:
        return {}  # tools only the embedding program has: their calls go to a person
