"""What an upgrade would change, and whether it may: a pure function of two specs and
the agent's state.

:func:`plan` compares the spec in force with the new one field by field, names the
tools the new one no longer has, the calls that still name them (an intent whose
outcome is not journaled, an unknown outcome, an action of the decision in flight),
the grants that name them, and every way the new spec lets the agent do more than
the old one did. :func:`check` then refuses what may not be applied: a removed tool
a call still names (a person resolves the call first, ``stead resolve``), and a
widening asked for by anyone but an admin.

Nothing here reads a store or imports what a spec names: the caller loads the tool
names of both specs (:mod:`stead.upgrades.apply`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import GovernanceError
from ..governance.gate import LEVELS
from ..state import State
from ..store.anchors import spec_digest
from ..store.tokens import ROLES

FIELDS = (
    "name", "instructions", "model", "model_options", "script", "tools", "mcp", "monitors",
    "limits", "autonomy", "tool_autonomy", "scope", "out_of_scope", "goals", "on_text",
    "workspace", "base_dir",
)  # fmt: skip
"""The spec's fields an upgrade may change (its tenant is the agent's, always)."""
MODEL_FIELDS = ("model", "model_options", "script")
"""A change to any of these gives the agent the new spec's model (a swap since is dropped)."""
UPGRADE_ROLE = "operator"
"""The least role that may upgrade an agent at all."""
WIDENING_ROLE = "admin"
"""The role an upgrade that widens what an agent may do needs."""


@dataclass(frozen=True, slots=True)
class Change:
    """One field of the spec, before and after."""

    field: str
    before: Any
    after: Any


@dataclass(frozen=True, slots=True)
class Plan:
    """What applying a new spec to one agent would do."""

    agent_id: str
    from_digest: str
    to_digest: str
    changes: tuple[Change, ...]
    added_tools: tuple[str, ...]
    removed_tools: tuple[str, ...]
    blocking: tuple[str, ...]
    """The calls that still name a removed tool, each described for a person."""
    orphan_grants: tuple[str, ...]
    """The agent's grants that name a removed tool (kept; they allow nothing now)."""
    widening: tuple[str, ...]
    """Each way the new spec lets the agent do more than the old one."""

    @property
    def unchanged(self) -> bool:
        return self.from_digest == self.to_digest

    @property
    def model_changed(self) -> bool:
        return any(c.field in MODEL_FIELDS for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "from": self.from_digest,
            "to": self.to_digest,
            "changes": [
                {"field": c.field, "before": c.before, "after": c.after} for c in self.changes
            ],
            "added_tools": list(self.added_tools),
            "removed_tools": list(self.removed_tools),
            "blocking": list(self.blocking),
            "orphan_grants": list(self.orphan_grants),
            "widening": list(self.widening),
        }


def _names(tools: Iterable[str], spec: Mapping[str, Any]) -> set[str]:
    """The tools a spec gives: its loaded tools' names, and ``SERVER__*`` for each MCP
    server (its tools are listed only when it starts)."""
    servers = {f"{m.get('name')}__*" for m in spec.get("mcp") or () if isinstance(m, Mapping)}
    return {t for t in tools if not any(t.startswith(s[:-1]) for s in servers)} | servers


def _names_tool(pattern: str, tool: Any) -> bool:
    """Whether a tool name of the agent's (a call's, a grant's) is ``pattern``'s."""
    if not isinstance(tool, str):
        return False
    return tool.startswith(pattern[:-1]) if pattern.endswith("__*") else tool == pattern


def _calls(state: State) -> list[tuple[str, str, str]]:
    """(call id, tool, what it is) of every call the agent has not settled."""
    found = [(c, str(v.get("tool")), "an intent whose outcome is not journaled")
             for c, v in state.pending.items()]  # fmt: skip
    found += [(c, str(v.get("tool")), "an unknown outcome") for c, v in state.unknown.items()]
    inflight = state.inflight or {}
    actions = inflight.get("actions") or []
    for i, action in enumerate(actions[int(inflight.get("next", 0)) :]):
        if isinstance(action, Mapping) and action.get("type") == "tool":
            where = f"action {i + int(inflight.get('next', 0))} of the decision in flight"
            found.append((where, str(action.get("tool")), "a call not yet made"))
    return found


def _widening(old: Mapping[str, Any], new: Mapping[str, Any], added: Iterable[str]) -> list[str]:
    found = [f"adds the tool {t}" for t in sorted(added)]
    old_servers = {m.get("name") for m in old.get("mcp") or ()}
    found += [f"adds the MCP server {m.get('name')}" for m in new.get("mcp") or ()
              if m.get("name") not in old_servers]  # fmt: skip
    old_limits, new_limits = old.get("limits") or {}, new.get("limits") or {}
    for key in sorted(new_limits):
        before, after = old_limits.get(key), new_limits.get(key)
        if isinstance(before, int | float) and isinstance(after, int | float) and after > before:
            found.append(f"raises the limit {key} from {before} to {after}")
    found += _more_autonomy("autonomy", old.get("autonomy"), new.get("autonomy"))
    old_levels, new_levels = old.get("tool_autonomy") or {}, new.get("tool_autonomy") or {}
    for tool in sorted(new_levels):
        before = old_levels.get(tool, old.get("autonomy"))
        found += _more_autonomy(f"autonomy of {tool}", before, new_levels[tool])
    for what in ("secrets", "env"):  # what a tool is handed of the tenant or the host
        before_given, after_given = _given(old, what), _given(new, what)
        for ref in sorted(after_given):
            more = sorted(after_given[ref] - before_given.get(ref, set()))
            if more and ref in before_given:  # a new tool's are part of adding it
                found.append(f"gives the tool {ref} the {what} {', '.join(more)}")
    old_rules, new_rules = old.get("monitors") or {}, new.get("monitors") or {}
    found += [f"removes the monitor {rule}" for rule in sorted(set(old_rules) - set(new_rules))]
    if old.get("out_of_scope") == "refuse" and new.get("out_of_scope") == "ask":
        found.append("asks a person about calls out of scope instead of refusing them")
    return found


def _given(spec: Mapping[str, Any], what: str) -> dict[str, set[str]]:
    """Each listed tool (by its reference) and the ``secrets`` or ``env`` it is given."""
    out: dict[str, set[str]] = {}
    for entry in spec.get("tools") or ():
        if isinstance(entry, Mapping):
            out[str(entry.get("tool"))] = {str(n) for n in entry.get(what) or ()}
        else:
            out[str(entry)] = set()
    return out


def _more_autonomy(what: str, before: Any, after: Any) -> list[str]:
    if before in LEVELS and after in LEVELS and LEVELS.index(after) > LEVELS.index(before):
        return [f"raises the {what} from {before} to {after}"]
    return []


def plan(
    agent_id: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    state: State,
    old_tools: Iterable[str],
    new_tools: Iterable[str],
) -> Plan:
    """What applying ``new`` in place of ``old`` (the spec in force) does to the agent
    whose state is ``state``; ``old_tools`` and ``new_tools`` are the names of the
    tools each spec gives."""
    before, after = _names(old_tools, old), _names(new_tools, new)
    removed, added = sorted(before - after), sorted(after - before)
    changes = tuple(Change(f, old.get(f), new.get(f)) for f in FIELDS if old.get(f) != new.get(f))
    blocking = tuple(
        f"{call} ({tool}): {what}"
        for call, tool, what in _calls(state)
        if any(_names_tool(r, tool) for r in removed)
    )
    orphans = tuple(
        f"{gid} ({g.get('tool')})"
        for gid, g in sorted(state.grants.items())
        if any(_names_tool(r, g.get("tool")) for r in removed)
    )
    return Plan(
        agent_id,
        spec_digest(old),
        spec_digest(new),
        changes,
        tuple(added),
        tuple(removed),
        blocking,
        orphans,
        tuple(_widening(old, new, added)),
    )


def check(found: Plan, role: str) -> None:
    """Refuse (:class:`~stead.errors.GovernanceError`) an upgrade that may not be applied."""
    agent = found.agent_id
    if role not in ROLES or ROLES.index(role) < ROLES.index(UPGRADE_ROLE):
        raise GovernanceError(
            f"agent {agent}: upgrading a spec needs the {UPGRADE_ROLE} role or above, and "
            f"this request has the {role} role (its versions may still be read)"
        )
    if found.blocking:
        raise GovernanceError(
            f"agent {agent}: the new spec removes {', '.join(found.removed_tools)}, which "
            f"calls not yet settled still name: {'; '.join(found.blocking)}. Settle each "
            f"first (stead resolve {agent} CALL --as done|retry|abort, or let the agent run "
            "until its step ends), then upgrade again"
        )
    if found.widening and ROLES.index(role) < ROLES.index(WIDENING_ROLE):
        raise GovernanceError(
            f"agent {agent}: the new spec widens what the agent may do "
            f"({'; '.join(found.widening)}); that needs the {WIDENING_ROLE} role, and this "
            f"request has the {role} role. Ask an admin to apply it"
        )
