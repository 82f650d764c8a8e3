"""``stead upgrade``: a new version of a spec, applied to one agent or to every agent
of a spec (a few first, watched, with ``--canary``); its plan, its history, its rollback.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.markup import escape

from ..errors import UsageError
from ..runtime.runtime import Runtime
from ..spec import AgentSpec, parse_spec
from ..upgrades.apply import history, previous_spec
from ..upgrades.canary import agents_of, canary
from ..upgrades.plan import Plan
from ..yamlsafe import load_yaml, read_text
from .common import emit_json, err, out, runtime_for, seconds, wants_json
from .governance import duration


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "upgrade",
        parents=[common],
        help="apply a new version of a spec to a live agent, or to every agent of a spec",
        description="Apply a new version of a spec (instructions, tools, MCP servers, model, "
        "monitors, limits) to an agent, journaled with the digest of each version. A "
        "running agent takes it between runs (--wait); a waiting or hibernated one at once.",
    )
    p.add_argument("agent_id", nargs="?", help="the agent to upgrade (or --spec NAME)")
    p.add_argument("--new", metavar="SPEC.yaml", help="the new version of the spec")
    p.add_argument("--spec", metavar="NAME", help="every agent made from the spec called NAME")
    p.add_argument("--canary", type=int, metavar="N", help="with --spec: N agents first")
    p.add_argument("--watch", type=duration, default=0.0, metavar="DURATION",
                   help="with --canary: how long to watch them (90s, 15m, 2h)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="show the plan, change nothing")
    p.add_argument("--reason", default="", help="why, as journaled")
    p.add_argument("--wait", type=seconds, default=0.0, metavar="SECONDS",
                   help="how long to wait for a running agent's step to end")  # fmt: skip
    p.add_argument("--rollback", action="store_true",
                   help="put back the spec the agent had before its last upgrade")  # fmt: skip
    p.add_argument("--history", action="store_true", help="list the agent's spec versions")
    p.set_defaults(func=cmd_upgrade)


def _load(path: str, tenant: str) -> AgentSpec:
    p = Path(path)
    data = load_yaml(read_text(p, "spec", UsageError), f"spec {p}", UsageError)
    if isinstance(data, dict):
        data = {"tenant": tenant, **data}
    return parse_spec(data, p.parent)


def _show(found: Plan, applied: bool) -> None:
    head = "unchanged" if found.unchanged else ("applied" if applied else "plan (not applied)")
    err.print(f"agent {found.agent_id}: {head}: {found.from_digest[:12]} -> {found.to_digest[:12]}")
    for c in found.changes:
        out.print(f"  {c.field}: {escape(repr(c.before))[:200]} -> {escape(repr(c.after))[:200]}")
    for label, items in (("widens (needs an admin)", found.widening),
                         ("removes", found.removed_tools),
                         ("refused until settled", found.blocking),
                         ("grants naming removed tools", found.orphan_grants)):  # fmt: skip
        if items:
            out.print(f"  {label}: {escape('; '.join(items))}")


def cmd_upgrade(args: argparse.Namespace) -> int:
    if (args.agent_id is None) == (args.spec is None):
        raise UsageError("name one agent (stead upgrade AGENT --new SPEC) or a spec (--spec NAME)")
    with runtime_for(args) as rt:
        if args.history or args.rollback:
            return _one_way(rt, args)
        if args.new is None:
            raise UsageError("give the new version of the spec: --new SPEC.yaml")
        if args.agent_id is not None:
            record = rt.store.get_record(args.agent_id)
            found = rt.upgrade(args.agent_id, _load(args.new, record.tenant), reason=args.reason,
                               dry_run=args.dry_run, wait=args.wait)  # fmt: skip
            if wants_json(args):
                emit_json({**found.to_json(), "applied": not args.dry_run and not found.unchanged})
            else:
                _show(found, not args.dry_run)
            return 0
        return _of_spec(rt, args)


def _of_spec(rt: Runtime, args: argparse.Namespace) -> int:
    agents = agents_of(rt, args.spec)
    if not agents:
        raise UsageError(f"no agent that has not ended was made from a spec named {args.spec!r}")
    spec = _load(args.new, rt.tenant or agents[0].tenant)  # its tenant: --tenant, or theirs
    agents = [a for a in agents if a.tenant == spec.tenant]
    if args.dry_run or args.canary is None:
        plans = [rt.upgrade(a.agent_id, spec, reason=args.reason, dry_run=args.dry_run,
                            wait=args.wait) for a in agents]  # fmt: skip
        if wants_json(args):
            emit_json([p.to_json() for p in plans])
        else:
            for found in plans:
                _show(found, not args.dry_run)
        return 0
    report = canary(rt, args.spec, spec, count=args.canary, watch=args.watch,
                    reason=args.reason, wait=args.wait)  # fmt: skip
    if wants_json(args):
        emit_json(report.to_json())
    else:
        err.print(f"canary {', '.join(report.canaries)}: {report.outcome}"
                  + (f" ({escape(report.why)})" if report.why else ""))  # fmt: skip
        if report.rest:
            err.print(f"then applied to {', '.join(report.rest)}")
    return 0 if report.outcome == "applied" else 1


def _one_way(rt: Runtime, args: argparse.Namespace) -> int:
    if args.agent_id is None:
        raise UsageError("--history and --rollback take one agent: stead upgrade AGENT --history")
    if args.history:
        rows: list[dict[str, Any]] = history(rt.store, args.agent_id)
        if wants_json(args):
            emit_json(rows)
        for r in [] if wants_json(args) else rows:
            what = ", ".join(r["changed"]) or "-"
            out.print(f"{r['seq']:>6}  {r['kind']:<14} {r['digest'][:12]}  {escape(what)}  "
                      f"{escape(r['by'])} {escape(r['reason'])}")  # fmt: skip
        return 0
    found = rt.upgrade(args.agent_id, previous_spec(rt.store, args.agent_id), rollback=True,
                       reason=args.reason or "rolled back", wait=args.wait)  # fmt: skip
    if wants_json(args):
        emit_json({**found.to_json(), "applied": True})
    else:
        _show(found, True)
    return 0
