"""Commands that read: ls, show, trace, audit verify."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..clock import iso
from ..errors import SecretError
from ..integrity.audit import audit
from ..sandbox.secrets import Vault
from ..store.shown import QUEUED, QUEUED_REASON, shown_status
from ..summaries import shown
from .common import (
    EXIT_COMPLETED,
    EXIT_FAILED,
    emit_json,
    out,
    position,
    runtime_for,
    status_style,
    tenant_of,
    wants_json,
)
from .follow import follow
from .progress import trace_detail


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("ls", parents=[common], help="list agents")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("show", parents=[common], help="show an agent's state")
    p.add_argument("agent_id")
    p.add_argument("--at", type=position, metavar="VERSION", help="the state as of this version")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("trace", parents=[common], help="print an agent's journal")
    p.add_argument("agent_id")
    p.add_argument("--from", dest="from_seq", type=position, default=1, metavar="SEQ")
    p.add_argument("--to", dest="to_seq", type=position, metavar="SEQ")
    p.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep printing events as they are committed, until the agent ends or Ctrl-C",
    )
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
        now = rt.clock.now()
        agents = [
            replace(a, status=shown_status(rt.store, a.agent_id, a.status, now))
            for a in rt.store.list_agents(tenant_of(args))
        ]
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
    table = Table(box=None, header_style="bold")
    # the id is what a person copies into the next command: never cut; the other
    # columns wrap instead when the terminal is narrow
    table.add_column("agent", no_wrap=True, min_width=max(len(a.agent_id) for a in agents))
    for heading in ("tenant", "name", "status", "ver", "updated"):
        table.add_column(heading, overflow="fold")
    for a in agents:
        table.add_row(
            a.agent_id,
            a.tenant,
            a.name,
            f"[{status_style(a.status)}]{a.status}[/]",
            str(a.version),
            iso(a.updated_at)[:16].replace("T", " "),
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
        status, reason = state.status, state.status_reason
        if (
            args.at is None
            and shown_status(rt.store, state.agent_id, status, rt.clock.now()) == QUEUED
        ):
            status, reason = QUEUED, QUEUED_REASON
    if wants_json(args):
        emit_json(state.to_json())
        return EXIT_COMPLETED
    latest = " (latest)" if args.at is None else ""
    out.print(
        f"[bold]{state.agent_id}[/] {record.name} · tenant {record.tenant} · "
        f"version {state.version}{latest}"
    )
    out.print(
        f"status: [{status_style(status)}]{status}[/]"
        + (f" — {escape(shown(reason))}" if reason else "")
    )
    out.print(
        f"decisions: {state.decisions} · steps completed: {state.steps_completed} · "
        f"tool calls: {state.calls_total} · activations: {state.activations}"
    )
    model = (state.model_override or {}).get("model") or record.spec.get("model")
    swapped = " (set since creation)" if state.model_override else ""
    out.print(f"model: {escape(shown(str(model)))}{swapped}")
    if state.usage:
        out.print(
            f"usage: {int(state.usage.get('tokens', 0)):,} tokens · "
            f"${state.usage.get('spend', 0):.4f} spent"
        )
    done = sum(g.get("status") == "completed" for g in state.goals)
    out.print(f"goals ({done} of {len(state.goals)} completed):" if state.goals else "goals: none")
    for g in state.goals:
        line = Text(f"  [{g.get('status')}]", style=status_style(str(g.get("status"))))
        line.append(f" {shown(str(g['id']))}: {shown(str(g['description']))}")
        out.print(line)
    out.print(
        "memory: " + (json.dumps(state.memory, sort_keys=True) if state.memory else "(empty)"),
        markup=False,
    )
    if state.pending:
        out.print(f"calls in flight: {', '.join(sorted(state.pending))}")
    if state.unknown:
        out.print(f"calls with unknown outcome: {', '.join(sorted(state.unknown))}")
    out.print(f"workspace: {len(state.manifest)} files")
    for path in sorted(state.manifest):
        out.print(f"  {shown(path)}  {state.manifest[path][:12]}", markup=False)
    out.print(f"head hash: {state.head_hash}")
    return EXIT_COMPLETED


def cmd_trace(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        if args.follow:
            return follow(rt.store, args.agent_id, args.from_seq, wants_json(args))
        events = rt.store.read_events(args.agent_id, args.from_seq, args.to_seq)
        if wants_json(args):
            for ev in events:
                sys.stdout.write(json.dumps(ev.to_json(), sort_keys=True) + "\n")
            return EXIT_COMPLETED
        table = Table("seq", "time", "kind", "detail", box=None)
        for ev in events:
            # Text, not markup: a detail's brackets ([secret:NAME]) are shown as they are
            table.add_row(str(ev.seq), iso(ev.at)[11:23], ev.kind, Text(trace_detail(ev)))
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
                "spec": report.spec,
            }
        )
    elif report.ok:
        out.print(
            f"[green]ok[/]: {report.events} events, hash chain intact and matching the "
            f"stored state, head {report.head_hash}; {report.anchor}; {report.spec}"
        )
    elif report.bad_event is not None:
        out.print(f"[red]broken[/]: event {report.bad_event} does not verify: {report.reason}")
    else:
        out.print(f"[red]broken[/]: {report.reason}")
    return EXIT_COMPLETED if report.ok else EXIT_FAILED
