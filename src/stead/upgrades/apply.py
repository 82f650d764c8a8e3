"""Applying a new version of an agent's spec: one journal event, one transaction.

:func:`upgrade` checks the new spec as a creation would (its tools and monitors
load), plans it against the spec in force (:mod:`stead.upgrades.plan`), and, if
the plan may be applied, journals ``spec_upgraded`` under the agent's lease as a
person's input: the digest it had (``from``), the digest it gets (``to``), the new
spec, the previous one (so a rollback needs nothing but the journal), who and why.
The store writes the ``spec`` column from that event in the same transaction
(:func:`stead.store.base.upgraded_spec`); the fold keeps ``to`` as the digest in
force, and the anchor of that commit pins it, so the spec stays sealed
(:mod:`stead.integrity.sealing`). New tools get the grants the new spec gives
them, and a changed autonomy is journaled as the person's change, in the same
commit.

An agent a worker is running holds its lease: the upgrade is refused with
:class:`~stead.errors.LeaseHeld` (or waited for, ``wait`` seconds) and never
lands mid-step. A waiting or hibernated agent takes it at once and runs on the new
spec from its next activation, which reads its record afresh.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from ..destinations import Bound
from ..errors import (
    GovernanceError,
    LeaseHeld,
    McpServerError,
    SecretError,
    SteadError,
    ToolError,
    UsageError,
)
from ..governance.grants import parse_grant
from ..ids import new_id
from ..integrity.watch import monitors_for
from ..journal import Event, Kind, NewEvent
from ..models.actions import check_tool_names
from ..models.registry import check_keys
from ..ports import RuntimePort
from ..spec import AgentSpec
from ..state import State
from ..store.base import BIRTH_KINDS, SPEC_KINDS, AgentRecord, Store
from ..tools.mcp.servers import first_listings, listing_context
from ..tools.mcp.tools import check_hooks
from ..tools.registry import load_tools
from .plan import Plan, check, plan

WAIT_PAUSE = 0.5
"""How long to wait between tries for a running agent's lease (``wait``)."""


def new_record(
    spec: AgentSpec | Mapping[str, Any], record: AgentRecord, rt: RuntimePort | None = None
) -> dict[str, Any]:
    """The spec as it is stored with the agent, checked as a creation's is: its tools
    and monitors load, and (given ``rt``) its model's vault key may go to its
    ``base_url``."""
    data = spec.to_record() if isinstance(spec, AgentSpec) else dict(spec)
    if data.get("tenant") != record.tenant:
        raise UsageError(
            f"agent {record.agent_id} is in tenant {record.tenant!r}, the new spec names "
            f"{data.get('tenant')!r}: an upgrade keeps the agent's tenant; give the spec "
            f"tenant: {record.tenant}"
        )
    tools = load_tools(data.get("tools") or [], [str(data.get("base_dir") or ".")])
    check_hooks(data)
    monitors_for(data, tools, strict=True)
    if data.get("model_options") is not None:
        check_tool_names(tools)
    if rt is not None:  # the key an upgraded model sends goes only where it is bound
        check_keys(data, partial(_vault_key, rt, record))
    return data


def _vault_key(rt: RuntimePort, record: AgentRecord, name: str) -> Bound | None:
    """A provider's key from the vault (the agent's, else its tenant's) with the hosts it
    may go to; None without a vault key or secret, as a creation looks it up."""
    try:
        return rt.vault().find(record.tenant, record.agent_id, name)
    except SecretError:
        return None


def _tools(rt: RuntimePort, record: AgentRecord) -> set[str]:
    """The names of the tools the spec in force gives (as named, if they no longer load)."""
    try:
        return set(rt.tools_for(record))
    except ToolError:
        refs = [t.get("tool") if isinstance(t, Mapping) else t for t in record.spec["tools"]]
        return {str(r).rpartition(":")[2] for r in refs}


def planned(
    rt: RuntimePort, agent_id: str, new: Mapping[str, Any], state: State | None = None
) -> Plan:
    """The plan of applying ``new`` (a stored spec's form) to the agent now."""
    record = rt.store.get_record(agent_id)
    state = rt.store.load_state(agent_id) if state is None else state
    new_tools = load_tools(new.get("tools") or [], [str(new.get("base_dir") or ".")])
    return plan(agent_id, record.spec, new, state, _tools(rt, record), new_tools)


def upgrade(
    rt: RuntimePort,
    agent_id: str,
    spec: AgentSpec | Mapping[str, Any],
    *,
    role: str = "admin",
    reason: str = "",
    dry_run: bool = False,
    wait: float = 0.0,
    rollback: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> Plan:
    """Apply ``spec`` to the agent (see the module); the plan, applied unless it is
    unchanged or ``dry_run`` (then nothing is refused: the plan shows what would be).
    ``role`` is the person's (the operator of the store acts as an admin); ``wait``
    is how many seconds a running agent's lease is waited for."""
    record = rt.store.get_record(agent_id)
    new = new_record(spec, record, rt)
    found = planned(rt, agent_id, new)
    if dry_run:  # the plan says what would refuse it (blocking, widening)
        return found
    check(found, role)
    if found.unchanged:
        return found
    if rt.store.load_state(agent_id).is_final:
        raise GovernanceError(f"agent {agent_id} has ended; its spec is kept as it ended")
    by = rt.person()
    listed = _listed(rt, record, new, found.added_tools)  # servers started outside the lease

    def build(state: State) -> list[NewEvent]:
        again = planned(rt, agent_id, new, state)  # under the lease: calls may have moved on
        check(again, role)
        if again.from_digest != found.from_digest:
            raise GovernanceError(
                f"agent {agent_id}: its spec changed while this upgrade was planned; plan again"
            )
        return [*_events(rt, again, record.spec, new, by, reason, rollback), *listed]

    deadline = time.monotonic() + wait
    while True:
        try:
            rt.append_as_person(agent_id, build)
            return found
        except LeaseHeld as exc:
            if time.monotonic() + WAIT_PAUSE > deadline:
                raise LeaseHeld(
                    f"{exc}. An upgrade lands between runs, never inside a step: try again "
                    "when it stops, or give it time to (stead upgrade --wait 60)"
                ) from None
            sleep(WAIT_PAUSE)


def _events(
    rt: RuntimePort,
    found: Plan,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    by: str,
    reason: str,
    rollback: bool,
) -> list[NewEvent]:
    upgraded = {
        "from": found.from_digest,
        "to": found.to_digest,
        "spec": dict(new),
        "previous": dict(old),
        "changed": [c.field for c in found.changes],
        "model_changed": found.model_changed,
        "orphan_grants": list(found.orphan_grants),
        "rollback": rollback,
        "by": by,
        "reason": reason,
    }
    events = [NewEvent(Kind.SPEC_UPGRADED, upgraded)]
    author = f"spec upgrade by {by}"
    for g in _new_grants(new, found.added_tools):
        grant = parse_grant(g, "spec scope")
        grant.update(id=new_id("gr", rt.clock), by=author, delegated_from=None)
        events.append(NewEvent(Kind.GRANT_ADDED, {"grant": grant}))
    if old.get("autonomy") != new.get("autonomy"):
        events.append(_autonomy(new.get("autonomy"), None, by))
    old_levels, new_levels = old.get("tool_autonomy") or {}, new.get("tool_autonomy") or {}
    for tool in sorted(new_levels):
        if old_levels.get(tool) != new_levels[tool]:
            events.append(_autonomy(new_levels[tool], tool, by))
    return events


def _listed(
    rt: RuntimePort, record: AgentRecord, new: Mapping[str, Any], added: Iterable[str]
) -> list[NewEvent]:
    """The tools of the MCP servers the new spec adds, listed as a creation lists them
    (started in the sandbox over the agent's workspace, or an empty folder while it
    is hibernated): what the agent is shown of them from its next run on."""
    wanted = {t[: -len("__*")] for t in added if t.endswith("__*")}
    servers = [dict(m) for m in new.get("mcp") or () if m.get("name") in wanted]
    if not servers:
        return []
    spec = AgentSpec(str(new.get("name")), str(new.get("model")), record.tenant,
                     mcp=tuple(servers))  # fmt: skip
    network = any(g.get("tool") == "network" for g in new.get("scope") or ())
    root = rt.workspace(record.agent_id, record.tenant).root
    with tempfile.TemporaryDirectory(prefix="stead-listing-") as empty:
        where = root if root.is_dir() else Path(empty)
        try:
            context = listing_context(rt, spec, record.agent_id, where, network)
            found = first_listings(list[Mapping[str, Any]](servers), context)
        except McpServerError as exc:
            raise McpServerError(
                str(exc).replace("so the agent was not made", "so the upgrade was not applied")
            ) from None
    return [NewEvent(Kind.MCP_TOOLS_LISTED, d) for d in found]


def _autonomy(level: Any, tool: str | None, by: str) -> NewEvent:
    data = {"level": level, "tool": tool, "by": by, "reason": "spec upgrade"}
    return NewEvent(Kind.AUTONOMY_CHANGED, data)


def _new_grants(new: Mapping[str, Any], added: Iterable[str]) -> list[dict[str, Any]]:
    """The grants the new spec gives its added tools (what a creation would give them)."""
    added = set(added)
    scope = new.get("scope")
    if scope is not None:
        return [dict(g) for g in scope if g.get("tool") in added]
    grants = [
        {"tool": t, "reason": "added by a spec upgrade"} for t in sorted(added)
        if not t.endswith("__*")
    ]  # fmt: skip
    return grants + [
        {"tool": t, "reason": "an MCP server a spec upgrade added"}
        for t in sorted(added)
        if t.endswith("__*")
    ]


def spec_events(store: Store, agent_id: str) -> list[Event]:
    """The agent's birth and upgrade events, in order."""
    return store.read_events_of_kinds(agent_id, SPEC_KINDS)


def digest_at(events: Iterable[Event], seq: int) -> str:
    """The digest of the spec in force when event ``seq`` was decided: that of the last
    upgrade before it, else the agent's birth ("": born before specs were sealed)."""
    digest = ""
    for ev in events:
        if ev.seq >= seq and ev.kind not in BIRTH_KINDS:
            break
        if ev.kind in BIRTH_KINDS:
            digest = str(ev.data.get("spec_digest") or "")
        elif ev.kind == Kind.SPEC_UPGRADED:
            digest = str(ev.data["to"])
    return digest


def history(store: Store, agent_id: str) -> list[dict[str, Any]]:
    """The agent's spec versions, oldest first: its birth's, then each upgrade's."""
    out: list[dict[str, Any]] = []
    for ev in spec_events(store, agent_id):
        if ev.kind in BIRTH_KINDS:
            out.append({"seq": ev.seq, "at": ev.at, "digest": ev.data.get("spec_digest") or "",
                        "kind": ev.kind, "by": "", "reason": "", "changed": []})  # fmt: skip
        else:
            d = ev.data
            kind = "rollback" if d.get("rollback") else "upgrade"
            out.append({"seq": ev.seq, "at": ev.at, "digest": d["to"], "from": d["from"],
                        "kind": kind, "by": d.get("by", ""), "reason": d.get("reason", ""),
                        "changed": list(d.get("changed") or [])})  # fmt: skip
    return out


def previous_spec(store: Store, agent_id: str) -> dict[str, Any]:
    """The spec the agent had before its last upgrade (what a rollback puts back)."""
    last = [e for e in spec_events(store, agent_id) if e.kind == Kind.SPEC_UPGRADED]
    if not last:
        raise SteadError(f"agent {agent_id} has never been upgraded; there is nothing to roll back")
    return dict(last[-1].data["previous"])
