"""Commands that read: ls, show, trace, audit verify."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..clock import iso
from ..errors import SecretError
from ..governance.grants import describe
from ..integrity.audit import audit
from ..journal import Event
from ..sandbox.secrets import Vault
from .common import (
    EXIT_COMPLETED,
    EXIT_FAILED,
    emit_json,
    out,
    runtime_for,
    status_style,
    tenant_of,
    wants_json,
)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("ls", parents=[common], help="list agents")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("show", parents=[common], help="show an agent's state")
    p.add_argument("agent_id")
    p.add_argument("--at", type=int, metavar="VERSION", help="the state as of this version")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("trace", parents=[common], help="print an agent's journal")
    p.add_argument("agent_id")
    p.add_argument("--from", dest="from_seq", type=int, default=1, metavar="SEQ")
    p.add_argument("--to", dest="to_seq", type=int, metavar="SEQ")
    p.set_defaults(func=cmd_trace)

    audit = sub.add_parser("audit", help="check an agent's tamper-evident journal")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    p = audit_sub.add_parser(
        "verify", parents=[common], help="walk the hash chain; exit 1 naming the first bad event"
    )
    p.add_argument("agent_id")
    p.set_defaults(func=cmd_audit_verify)


def cmd_ls(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        agents = rt.store.list_agents(tenant_of(args))
    if wants_json(args):
        emit_json(
            [
                {
                    "agent_id": a.agent_id,
                    "tenant": a.tenant,
                    "name": a.name,
                    "status": a.status,
                    "version": a.version,
                    "updated_at": a.updated_at,
                }
                for a in agents
            ]
        )
        return EXIT_COMPLETED
    if not agents:
        out.print("no agents yet; create one with `stead run SPEC`")
        return EXIT_COMPLETED
    table = Table("agent", "tenant", "name", "status", "version", "updated")
    for a in agents:
        table.add_row(
            a.agent_id,
            a.tenant,
            a.name,
            f"[{status_style(a.status)}]{a.status}[/]",
            str(a.version),
            iso(a.updated_at),
        )
    out.print(table)
    return EXIT_COMPLETED


def cmd_show(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        record = rt.store.get_record(args.agent_id)
        state = (
            rt.store.state_at(args.agent_id, args.at)
            if args.at is not None
            else rt.store.load_state(args.agent_id)
        )
    if wants_json(args):
        emit_json(state.to_json())
        return EXIT_COMPLETED
    latest = " (latest)" if args.at is None else ""
    out.print(
        f"[bold]{state.agent_id}[/] {record.name} · tenant {record.tenant} · "
        f"version {state.version}{latest}"
    )
    out.print(
        f"status: [{status_style(state.status)}]{state.status}[/]"
        + (f" — {escape(state.status_reason)}" if state.status_reason else "")
    )
    out.print(
        f"decisions: {state.decisions} · steps completed: {state.steps_completed} · "
        f"tool calls: {state.calls_total} · activations: {state.activations}"
    )
    model = (state.model_override or {}).get("model") or record.spec.get("model")
    swapped = " (set since creation)" if state.model_override else ""
    out.print(f"model: {escape(str(model))}{swapped}")
    if state.usage:
        out.print(
            f"usage: {int(state.usage.get('tokens', 0)):,} tokens · "
            f"${state.usage.get('spend', 0):.4f} spent"
        )
    out.print("goals:")
    for g in state.goals:
        out.print(f"  [{g['status']}] {g['id']}: {g['description']}")
    out.print(
        "memory: " + (json.dumps(state.memory, sort_keys=True) if state.memory else "(empty)")
    )
    if state.pending:
        out.print(f"calls in flight: {', '.join(sorted(state.pending))}")
    if state.unknown:
        out.print(f"calls with unknown outcome: {', '.join(sorted(state.unknown))}")
    out.print(f"workspace: {len(state.manifest)} files")
    for path in sorted(state.manifest):
        out.print(f"  {path}  {state.manifest[path][:12]}")
    out.print(f"head hash: {state.head_hash}")
    return EXIT_COMPLETED


def _summary(ev: Event) -> str:
    d = ev.data
    if ev.kind == "decision":
        parts = []
        for a in d["actions"]:
            parts.append(f"{a['tool']}" if a["type"] == "tool" else a["type"])
        return f"step {d['step']}: " + ", ".join(parts)
    if ev.kind in ("tool_intent", "tool_result", "outcome_unknown", "reconciled", "call_resolved"):
        extra = ""
        if ev.kind == "tool_result":
            extra = " ok" if d.get("ok") else f" error: {d.get('error')}"
            if d.get("rerun"):
                extra += " (re-run after a crash)"
        elif ev.kind == "reconciled":
            extra = f" → {d.get('verdict')}"
        elif ev.kind == "call_resolved":
            extra = f" as {d.get('resolution')} by {d.get('by')}"
        verdict = d.get("verdict")
        if isinstance(verdict, Mapping) and verdict.get("decision") == "allow":
            extra += f" ({_verdict(verdict)})"
        return f"{d.get('call_id')} {d.get('tool', '')}{extra}"
    if ev.kind == "workspace_restored":
        return "rolled back: " + ", ".join(d.get("paths", []))
    if ev.kind == "status_changed":
        return f"{d.get('status')}: {d.get('reason', '')}"
    if ev.kind == "memory_written":
        return ", ".join(sorted(d.get("values", {})))
    if ev.kind in ("goal_pushed", "goal_completed"):
        return str(d.get("id"))
    if ev.kind == "mcp_tools_listed":
        names = ", ".join(str(t.get("name")) for t in d.get("tools", []))
        changed = "changed its tools: " if d.get("changed") else ""
        return f"MCP server {d.get('server')} {changed}{names}"
    if ev.kind == "finish_claimed":
        return str(d.get("summary", "")) + _answer_mark(d)
    if ev.kind in ("input_received", "input_requested"):
        return str(d.get("text", d.get("prompt", ""))) + _answer_mark(d)
    return _governance_summary(ev.kind, d)


def _answer_mark(d: Mapping[str, Any]) -> str:
    """What a trace line says of an answer to a person that repeats untrusted text."""
    seen = d.get("provenance") or {}
    marks = []
    if seen.get("source") == "untrusted":
        marks.append(f"repeats untrusted text from event {', '.join(map(str, seen['from']))}")
    if seen.get("approval"):
        marks.append(f"a person saw it first ({seen['approval']})")
    return f"  [{'; '.join(marks)}]" if marks else ""


def _verdict(v: Mapping[str, Any]) -> str:
    parts = [f"allowed by {v.get('grant') or 'no grant'}", f"policy v{v.get('policy_version')}"]
    if v.get("approval"):
        parts.append(f"approval {v['approval']}")
    return ", ".join(parts)


def _governance_summary(kind: str, d: Mapping[str, Any]) -> str:
    """Who allowed what, under which policy version: the audit lines of ``stead trace``."""
    if kind == "grant_added":
        g = d["grant"]
        return f"{g['id']} {describe(g)} by {g.get('by')}"
    if kind == "grant_revoked":
        return f"{d['grant']} by {d.get('by')}: {d.get('reason', '')}"
    if kind == "autonomy_changed":
        what = f"tool {d['tool']}" if d.get("tool") else "agent"
        return f"{what} → {d['level']} by {d.get('by')}"
    if kind == "approval_requested":
        return f"{d['approval_id']} {d['tool']} (policy v{d['policy_version']}): {d['reason']}"
    if kind == "approval_granted":
        return f"{d['approval_id']} by {d['by']} until {iso(d['valid_until'])}"
    if kind in ("approval_denied", "approval_lapsed"):
        return f"{d['approval_id']}: {d.get('reason', '')}" + (
            f" (by {d['by']})" if d.get("by") else ""
        )
    if kind in ("proposal_recorded", "proposal_accepted"):
        return f"{d['proposal_id']} {d.get('tool', '')}"
    if kind == "governance_refused":
        return f"{d['type']}: {d['reason']}"
    if kind in ("message_received", "message_refused"):
        who = d.get("from") or d.get("claimed_from")
        return f"{d.get('message')} from {who}" + (f": {d['reason']}" if d.get("reason") else "")
    if kind in ("delegated", "message_sent"):
        return f"to {d.get('to')}: " + ("ok" if d.get("ok") else f"error: {d.get('error')}")
    if kind == "identity_created":
        return f"ed25519 {d['public_key'][:16]}…"
    return ""


def cmd_trace(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        events = rt.store.read_events(args.agent_id, args.from_seq, args.to_seq)
        if wants_json(args):
            for ev in events:
                sys.stdout.write(json.dumps(ev.to_json(), sort_keys=True) + "\n")
            return EXIT_COMPLETED
        table = Table("seq", "time", "kind", "detail", box=None)
        for ev in events:
            # Text, not markup: a detail's brackets ([secret:NAME]) are shown as they are
            table.add_row(str(ev.seq), iso(ev.at)[11:23], ev.kind, Text(_summary(ev)))
        out.print(table)
    return EXIT_COMPLETED


def cmd_audit_verify(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        record = rt.store.get_record(args.agent_id)
        try:
            vault: Vault | None = rt.vault()  # to check the anchor against the vault's key
        except SecretError:
            vault = None
        report = audit(
            rt.store,
            args.agent_id,
            vault=vault,
            workspace=rt.workspace(args.agent_id, record.tenant),
            now=rt.clock.now(),
        )
    if wants_json(args):
        emit_json(
            {
                "agent_id": args.agent_id,
                "ok": report.ok,
                "events": report.events,
                "head_hash": report.head_hash,
                "bad_event": report.bad_event,
                "reason": report.reason,
                "anchored": report.anchored,
                "anchor": report.anchor,
                "drift": list(report.drift),
            }
        )
    elif report.ok:
        out.print(
            f"[green]ok[/]: {report.events} events, hash chain intact and matching the "
            f"stored state, head {report.head_hash}; {report.anchor}"
        )
    elif report.bad_event is not None:
        out.print(f"[red]broken[/]: event {report.bad_event} does not verify: {report.reason}")
    else:
        out.print(f"[red]broken[/]: {report.reason}")
    return EXIT_COMPLETED if report.ok else EXIT_FAILED
