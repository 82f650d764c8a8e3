"""The gate: may this call run now? Asked at the moment a call is about to execute.

:func:`judge` is pure: it reads the agent's folded state (autonomy, grants,
approvals), the tenant's compiled policy and the runtime clock's ``now``, and
returns a :class:`Verdict`. The activation journals the verdict with the call
(in its intent, or in its result when the call is refused or read-only), so
``stead trace`` shows who allowed what, when, and under which policy version.

The order of the questions:

1. The autonomy level for this tool (a per-tool override, else the agent's):
   ``observe`` refuses anything not ``read_only``; ``advise`` turns it into a
   proposal; ``act_with_approval`` makes it need an approval.
2. The scope ledger: a live grant must cover the tool and arguments now
   (delegated grants also need every grant they descend from to still cover
   the call). With none, the call is refused, or needs an approval when the
   spec says ``out_of_scope: ask``.
3. The policy: ``deny`` refuses, ``ask`` makes the call need an approval.
4. If an approval is needed, one granted for exactly this call (same call id,
   tool, argument hash and policy version, inside its validity window) lets
   it run and is used up; one that no longer fits is reported as lapsed, and
   a fresh approval is requested.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..canonical import dumps, sha256_hex
from ..state import State
from .grants import allows, inactive_reason
from .policy import CompiledPolicy

LEVELS = ("observe", "advise", "act_with_approval", "act_autonomously")
IN_SCOPE = "in scope"
MAX_DELEGATION_DEPTH = 8

ParentLookup = Callable[[str], State | None]
"""Loads the state of the agent a delegated grant came from (None if it is gone)."""


def args_hash(args: Mapping[str, Any]) -> str:
    return sha256_hex(dumps(dict(args)))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the gate decided for one call, and why."""

    decision: str  # "allow" | "deny" | "ask" | "propose"
    reason: str
    level: str
    policy_version: int
    grant: str | None = None
    approval: str | None = None
    lapsed: tuple[tuple[str, str], ...] = field(default=())
    policy_reasons: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        # journaled with every call, so the common case (in scope, fully
        # autonomous) is kept short: what is left out is the default
        out: dict[str, Any] = {"decision": self.decision, "policy_version": self.policy_version}
        if self.reason != IN_SCOPE:
            out["reason"] = self.reason
        if self.level != "act_autonomously":
            out["autonomy"] = self.level
        if self.grant:
            out["grant"] = self.grant
        if self.approval:
            out["approval"] = self.approval
        if self.policy_reasons:
            out["policy"] = list(self.policy_reasons)
        return out


def effective_level(state: State, tool: str) -> str:
    return state.tool_autonomy.get(tool, state.autonomy)


def covering_grant(
    state: State,
    tool: str,
    args: Mapping[str, Any],
    now: float,
    parents: ParentLookup | None,
) -> tuple[str | None, str]:
    """The id of a live grant covering the call (or None), and why none does."""
    why = "no grant in the agent's scope covers this tool"
    for gid in sorted(state.grants):
        grant = state.grants[gid]
        problem = allows(grant, tool, args, now)
        if problem is None:
            problem = ancestry_problem(grant, now, parents, tool, args)
        if problem is None:
            return gid, ""
        if not problem.startswith(f"grant {gid} covers "):
            why = problem  # a grant for this tool that does not fit says more than "none"
    return None, why


def ancestry_problem(
    grant: Mapping[str, Any],
    now: float,
    parents: ParentLookup | None,
    tool: str | None = None,
    args: Mapping[str, Any] | None = None,
) -> str | None:
    """Why a delegated grant no longer holds through its ancestors, or None if it does.

    With a call (``tool``, ``args``) each ancestor must allow that call; without
    one (``stead scope``), each must still be held and within its time.
    """
    source = grant.get("delegated_from")
    depth = 0
    while source:
        depth += 1
        if depth > MAX_DELEGATION_DEPTH or parents is None:
            return f"grant {grant['id']}: its delegation chain cannot be checked"
        parent_state = parents(source["agent"])
        parent = None if parent_state is None else parent_state.grants.get(source["grant"])
        if parent is None:
            return (
                f"grant {grant['id']} was delegated from grant {source['grant']} of agent "
                f"{source['agent']}, which was revoked"
            )
        # the parent's own uses are its own; what was carved out for the child is not
        unlimited = {**parent, "max_uses": None}
        problem = (
            inactive_reason(unlimited, now)
            if tool is None
            else allows(unlimited, tool, args or {}, now)
        )
        if problem is not None:
            return f"grant {grant['id']} is delegated and its source no longer allows it: {problem}"
        source = parent.get("delegated_from")
    return None


def judge(
    state: State,
    *,
    call_id: str,
    tool: str,
    effect: str,
    args: Mapping[str, Any],
    now: float,
    policy: CompiledPolicy | None,
    parents: ParentLookup | None = None,
    out_of_scope: str = "refuse",
    taint: Mapping[str, Any] | None = None,
) -> Verdict:
    """Decide whether the call may run now; see the module docstring for the order."""
    level = effective_level(state, tool)
    version = policy.version if policy is not None else 0
    read_only = effect == "read_only"
    if level == "observe" and not read_only:
        return Verdict(
            "deny", f"autonomy is observe for {tool}: only read-only tools run", level, version
        )
    grant, why = covering_grant(state, tool, args, now, parents)
    needs: list[str] = []
    if grant is None:
        if out_of_scope != "ask":
            return Verdict("deny", f"out of scope: {why}", level, version)
        needs.append(f"out of scope ({why})")
    policy_reasons: tuple[str, ...] = ()
    if policy is not None:
        pv = policy.evaluate(
            agent_id=state.agent_id,
            tenant=state.tenant,
            name=state.name,
            tool=tool,
            effect=effect,
            args=args,
            autonomy=level,
            now=now,
            grants=[grant] if grant else [],
            taint=taint,
        )
        policy_reasons = pv.reasons
        if pv.decision == "deny":
            return Verdict(
                "deny",
                f"policy version {version} denies it ({', '.join(pv.reasons)})",
                level,
                version,
                grant,
                policy_reasons=policy_reasons,
            )
        if pv.decision == "ask":
            needs.append(f"policy version {version} asks for a person ({', '.join(pv.reasons)})")
    if level == "advise" and not read_only:
        return Verdict(
            "propose",
            f"autonomy is advise for {tool}: recorded as a proposal",
            level,
            version,
            grant,
        )
    if level == "act_with_approval" and not read_only:
        needs.append(f"autonomy is act_with_approval for {tool}")
    if not needs:
        return Verdict("allow", IN_SCOPE, level, version, grant, policy_reasons=policy_reasons)
    aid, lapsed = _approvals(state, call_id, tool, args, version, now)
    if aid is not None:
        return Verdict(
            "allow",
            f"approved by {state.approvals[aid].get('by')} ({'; '.join(needs)})",
            level,
            version,
            grant,
            approval=aid,
            policy_reasons=policy_reasons,
        )
    return Verdict(
        "ask",
        "; ".join(needs),
        level,
        version,
        grant,
        lapsed=tuple(lapsed),
        policy_reasons=policy_reasons,
    )


def granted_approval(
    state: State, call_id: str, tool: str, args: Mapping[str, Any], version: int, now: float
) -> str | None:
    """The id of a person's approval, still good, for exactly this call; else None
    (for a call a monitor asks about, where the gate itself needed none)."""
    return _approvals(state, call_id, tool, args, version, now)[0]


def _approvals(
    state: State, call_id: str, tool: str, args: Mapping[str, Any], version: int, now: float
) -> tuple[str | None, list[tuple[str, str]]]:
    """The granted approval that still covers this call, and why the others lapsed."""
    wanted = args_hash(args)
    lapsed: list[tuple[str, str]] = []
    for aid, a in sorted(state.approvals.items()):
        if a["call_id"] != call_id or a["status"] != "granted":
            continue
        problem = _approval_problem(a, tool, wanted, version, now)
        if problem is None:
            return aid, lapsed
        lapsed.append((aid, problem))
    return None, lapsed


def _approval_problem(
    a: Mapping[str, Any], tool: str, wanted_hash: str, version: int, now: float
) -> str | None:
    if a["tool"] != tool:
        return f"it was given for {a['tool']}, not {tool}"
    if a["args_hash"] != wanted_hash:
        return "the call's arguments are not the ones that were approved"
    if a["policy_version"] != version:
        return (
            f"it was given under policy version {a['policy_version']}, and version "
            f"{version} is now in force"
        )
    if now < a["valid_from"]:
        return f"it is valid only from {a['valid_from']}"
    if now >= a["valid_until"]:
        return f"it expired at {a['valid_until']} (now {now})"
    return None
