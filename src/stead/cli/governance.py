"""``stead grant|revoke|scope|autonomy|approvals|approve|deny|policy``: people's authority."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

from rich.markup import escape

from ..clock import iso
from ..errors import GovernanceError, UsageError
from ..governance.gate import LEVELS
from ..governance.grants import MAX_VALID_SECONDS, describe
from ..integrity.inbox import explained, origin_text, waited_text
from ..runtime.authority import DEFAULT_APPROVAL_SECONDS
from ..summaries import shown
from ..yamlsafe import read_text
from .common import EXIT_COMPLETED, emit_json, err, out, runtime_for, tenant_of, wants_json

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``2h`` or ``1d``."""
    m = _DURATION.match(text.strip())
    if m is None or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration; write it like 90s, 15m, 2h or 1d"
        )
    seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if not seconds <= MAX_VALID_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is longer than 10 years ({MAX_VALID_SECONDS // 86400}d), "
            "the longest a grant or approval may last"
        )
    return seconds


def _literal(text: str) -> Any:
    """A number if ``text`` is written as exactly that number (``7``, ``2.5``, not
    ``007``, ``1.10`` or ``nan``), a string in double quotes as that string, else text."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        if repr(value) == text and math.isfinite(value):
            return value
    return text


def parse_arg_constraint(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME=KIND:VALUE`` from ``--arg``, e.g. ``path=glob:src/*`` or ``count=max:5``."""
    name, eq, rest = text.partition("=")
    kind, colon, value = rest.partition(":")
    if not (name and eq and kind and colon):
        raise UsageError(
            f"--arg {text!r}: write NAME=KIND:VALUE, e.g. path=glob:src/*, count=max:5, "
            "mode=one_of:fast,slow or url=hosts:api.example.com"
        )
    if kind in ("max", "min"):
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise UsageError(f"--arg {text!r}: {kind} takes a number, e.g. count=max:5")
        return name, {kind: number}
    if kind == "one_of":
        # numbers stay numbers (size=one_of:1,2 allows size=1); quote to keep text
        return name, {kind: [_literal(v) for v in value.split(",") if v]}
    if kind == "hosts":
        return name, {kind: [v for v in value.split(",") if v]}
    return name, {kind: value}


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("grant", parents=[common], help="add a grant to an agent's scope")
    p.add_argument("agent_id")
    p.add_argument("tool", help="a tool name or pattern, e.g. write_file or fs_*")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=KIND:VALUE",
        help="constrain an argument: glob, max, min, one_of or hosts (repeatable)",
    )
    p.add_argument("--max-uses", type=int, metavar="N")
    p.add_argument("--valid-for", type=duration, metavar="DURATION", help="e.g. 15m, 2h, 7d")
    p.add_argument("--delegable", action="store_true", help="the agent may delegate parts of it")
    p.add_argument("--reason", default="")
    p.set_defaults(func=cmd_grant)

    p = sub.add_parser("revoke", parents=[common], help="revoke a grant (and its delegations)")
    p.add_argument("agent_id")
    p.add_argument("grant_id")
    p.add_argument("--reason", default="")
    p.set_defaults(func=cmd_revoke)

    p = sub.add_parser("scope", parents=[common], help="what an agent may do now, and until when")
    p.add_argument("agent_id")
    p.set_defaults(func=cmd_scope)

    p = sub.add_parser("autonomy", parents=[common], help="set an agent's autonomy level")
    p.add_argument("agent_id")
    p.add_argument("level", choices=LEVELS)
    p.add_argument("--tool", help="set the level for this one tool only")
    p.add_argument("--reason", default="")
    p.set_defaults(func=cmd_autonomy)

    p = sub.add_parser("approvals", parents=[common], help="list calls waiting for approval")
    p.set_defaults(func=cmd_approvals)

    p = sub.add_parser("approve", parents=[common], help="approve one waiting call, once")
    p.add_argument("approval_id")
    p.add_argument(
        "--valid-for",
        type=duration,
        default=DEFAULT_APPROVAL_SECONDS,
        metavar="DURATION",
        help="how long the approval may be used (default 15m)",
    )
    p.set_defaults(func=cmd_approve)

    p = sub.add_parser("deny", parents=[common], help="deny one waiting call")
    p.add_argument("approval_id")
    p.add_argument("--reason", required=True)
    p.set_defaults(func=cmd_deny)

    p = sub.add_parser(
        "accept", parents=[common], help="run a proposed call now, under your authority"
    )
    p.add_argument("agent_id")
    p.add_argument("proposal_id")
    p.set_defaults(func=cmd_accept)

    policy = sub.add_parser("policy", help="set or show the tenant's Cedar policy")
    ps = policy.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    p = ps.add_parser("set", parents=[common], help="store a new policy version from a file")
    p.add_argument("file", type=Path)
    p.set_defaults(func=cmd_policy_set)
    p = ps.add_parser("show", parents=[common], help="print the policy in force")
    p.add_argument("--version", type=int)
    p.set_defaults(func=cmd_policy_show)


def _tenant(args: argparse.Namespace) -> str:
    return tenant_of(args) or "default"


def _arg_constraints(texts: list[str]) -> dict[str, dict[str, Any]]:
    """Every ``--arg``, each argument named once: a second would silently replace the
    first and so widen the grant (one constraint per argument; no ranges yet)."""
    out: dict[str, dict[str, Any]] = {}
    for text in texts:
        name, constraint = parse_arg_constraint(text)
        if name in out:
            raise UsageError(
                f"--arg {name} is given twice; an argument takes one constraint "
                f"(here {out[name]} and {constraint}); grant the narrower one"
            )
        out[name] = constraint
    return out


def cmd_grant(args: argparse.Namespace) -> int:
    grant: dict[str, Any] = {
        "tool": args.tool,
        "args": _arg_constraints(args.arg),
        "max_uses": args.max_uses,
        "delegable": args.delegable,
    }
    if args.valid_for is not None:
        grant["valid_for"] = args.valid_for
    with runtime_for(args) as rt:
        made = rt.grant(args.agent_id, grant, reason=args.reason)
    if wants_json(args):
        emit_json(made)
    else:
        out.print(f"granted {made['id']} to {args.agent_id}: {describe(made)}")
    return EXIT_COMPLETED


def cmd_revoke(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        rt.revoke(args.agent_id, args.grant_id, reason=args.reason)
    if not wants_json(args):
        out.print(f"revoked {args.grant_id} of {args.agent_id}")
    return EXIT_COMPLETED


def cmd_scope(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        report = rt.scope(args.agent_id)
        state = rt.store.load_state(args.agent_id)
    live = {g["id"]: g["inactive"] for g in report["grants"]}
    if wants_json(args):
        emit_json(report)
        return EXIT_COMPLETED
    out.print(f"agent {state.agent_id} ({state.name}), autonomy {state.autonomy}")
    for tool, level in sorted(state.tool_autonomy.items()):
        out.print(f"  {shown(tool)}: {level}", markup=False)
    out.print(f"policy version {report['policy_version']} of tenant {state.tenant}")
    out.print("grants:" if state.grants else "grants: none (every call is refused)")
    for gid, g in sorted(state.grants.items()):
        note = f"  [yellow](inactive: {live.get(gid)})[/]" if live.get(gid) else ""
        out.print(f"  {gid}  {describe(g)}  by {g.get('by')}{note}")
    for a in state.approvals.values():
        out.print(f"approval {a['approval_id']} ({a['status']}) for {shown(str(a['tool']))}",
                  markup=False)  # fmt: skip
    for p in state.proposals.values():
        out.print(f"proposal {p['proposal_id']}: {shown(str(p['tool']))}({p['args']})",
                  markup=False)  # fmt: skip
    return EXIT_COMPLETED


def _spec_tool_names(spec: dict[str, Any]) -> set[str]:
    """The names the spec's tools most likely go by (a module:function path by its
    function's name; a tool may rename itself, so this is for a warning only)."""
    names = set()
    for entry in spec.get("tools", []):
        ref = entry["tool"] if isinstance(entry, dict) else str(entry)
        names.add(ref.rpartition(":")[2])
    return names


def cmd_autonomy(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        rt.set_autonomy(args.agent_id, args.level, tool=args.tool, reason=args.reason)
        known = _spec_tool_names(rt.store.get_record(args.agent_id).spec)
    if not wants_json(args):
        what = f"tool {args.tool} of {args.agent_id}" if args.tool else args.agent_id
        out.print(f"autonomy of {what} is now {args.level}")
    if args.tool and known and args.tool not in known:
        err.print(
            f"note: the spec of {args.agent_id} lists no tool named {args.tool} (it lists "
            f"{', '.join(sorted(known))}); the override counts only for a tool of that name"
        )
    return EXIT_COMPLETED


def cmd_approvals(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        pending = explained(rt, rt.pending_approvals(tenant_of(args)))
    if wants_json(args):
        emit_json([{"agent_id": agent, **a} for agent, a in pending])
    elif not pending:
        out.print("no calls are waiting for approval")
    for agent, a in pending if not wants_json(args) else ():
        _print_approval(agent, a)
    return EXIT_COMPLETED


def _print_approval(agent: str, a: dict[str, Any]) -> None:
    """One approval as a person reads it: every text from the model or a tool is
    shown with its control characters escaped and its markup inert."""

    def safe(text: Any) -> str:
        return escape(shown(str(text)))

    valid = a["valid"]
    out.print(f"{a['approval_id']}  {safe(a['tool'])}  ({safe(a.get('reason', ''))})")
    task = f": {safe(a['agent']['task'])}" if a["agent"]["task"] else ""
    out.print(f"  agent {safe(a['agent']['name'])} ({agent}){task}")
    if a.get("why"):
        out.print(f"  the model says: {safe(a['why'])}")
    for name, value in (a.get("args") or {}).items():
        origin = origin_text(a["origins"].get(name, {}))
        out.print(f"  {safe(name)} = {safe(json.dumps(value, ensure_ascii=False))}  "
                  f"(came from: {safe(origin)})")  # fmt: skip
    if a.get("change"):
        out.print("  what it changes:")
        for line in str(a["change"]).splitlines():
            out.print(f"    {safe(line)}")
    for finding in a.get("monitors") or []:
        out.print(f"  monitors found: {safe(finding)}")
    holds = (
        f"valid while policy v{valid['policy_version']} is in force"
        if valid["holds"]
        else f"asked under policy v{valid['policy_version']}, now v{valid['now']}: "
        "approving it lets nothing run; the call is asked again"
    )
    out.print(f"  asked {iso(a['asked_at'])}, waiting {waited_text(a['waited'])}; {holds}")


def cmd_approve(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        agent, _ = rt.approve(args.approval_id, valid_for=args.valid_for)
    if wants_json(args):
        emit_json({"approval_id": args.approval_id, "agent_id": agent, "valid_for": args.valid_for})
    else:
        out.print(
            f"approved {args.approval_id} for {args.valid_for:.0f} s; "
            f"continue with: stead resume {agent}"
        )
    return EXIT_COMPLETED


def cmd_deny(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        agent, _ = rt.deny(args.approval_id, args.reason)
    if not wants_json(args):
        out.print(f"denied {args.approval_id}; agent {agent} sees the refusal when it resumes")
    return EXIT_COMPLETED


def cmd_accept(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        state = rt.accept(args.agent_id, args.proposal_id)
    call = next(c for c in reversed(state.recent_calls) if c["call_id"] == args.proposal_id)
    if wants_json(args):
        emit_json(call)
    else:
        outcome = f"ok: {call.get('output')}" if call["ok"] else f"error: {call.get('error')}"
        out.print(f"ran {args.proposal_id} {call['tool']} -> {outcome}", markup=False)
    return EXIT_COMPLETED


def cmd_policy_set(args: argparse.Namespace) -> int:
    text = read_text(args.file, "policy file", UsageError)
    with runtime_for(args) as rt:
        version = rt.set_policy(_tenant(args), text)
    if wants_json(args):
        emit_json({"tenant": _tenant(args), "version": version})
    else:
        out.print(f"policy version {version} of tenant {_tenant(args)} is in force")
    return EXIT_COMPLETED


def cmd_policy_show(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        record = rt.store.get_policy(_tenant(args), args.version)
    if record is None:
        raise GovernanceError(
            f"tenant {_tenant(args)} has no policy"
            + (f" version {args.version}" if args.version else "")
            + "; every call the scope ledger allows is allowed. "
            "Set one with `stead policy set FILE`"
        )
    if wants_json(args):
        emit_json(
            {
                "version": record.version,
                "text": record.text,
                "set_by": record.set_by,
                "set_at": record.set_at,
            }
        )
    else:
        out.print(f"# version {record.version}, set by {record.set_by}", markup=False)
        out.print(record.text, markup=False)
    return EXIT_COMPLETED
