"""``stead schedule``: wake an agent, or make a fresh one from a spec, at chosen times."""

from __future__ import annotations

import argparse
from typing import Any

from ..clock import iso
from ..schedules import Schedules
from ..spec import load_spec
from .common import EXIT_COMPLETED, emit_json, out, runtime_for, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    top = sub.add_parser("schedule", help="wake agents (or make fresh ones) at chosen times")
    ss = top.add_subparsers(dest="schedule_command", required=True, metavar="COMMAND")

    p = ss.add_parser("add", parents=[common], help="add a schedule (stead work fires it)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("agent_id", nargs="?", metavar="AGENT", help="the agent to wake")
    target.add_argument("--spec", metavar="FILE", help="make a fresh agent from this spec per run")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="LINE", help="a cron line, e.g. '0 9 * * mon-fri'")
    when.add_argument("--every", metavar="DURATION", help="an interval: 90s, 15m, 2h, 1d")
    when.add_argument("--at", metavar="TIME", help="once, at an ISO 8601 time")
    p.add_argument("--tz", help="the cron line's or time's zone (IANA name; default UTC)")
    p.add_argument("--start", metavar="TIME", help="when --every counts from (default: now)")
    p.add_argument("--message", "-m", help="what the agent is told at each run")
    p.add_argument(
        "--catch-up",
        choices=("skip", "one", "all"),
        help="times missed while no worker ran: skip them, run one, or all (default one)",
    )
    p.add_argument("--max-catch-up", type=int, metavar="N", help="with --catch-up all, at most N")
    p.add_argument(
        "--overlap",
        choices=("skip", "queue", "cancel_previous"),
        help="a time due while the last run goes on: skip it (default), queue it, "
        "or cancel the last run (--spec only)",
    )
    p.add_argument(
        "--jitter", metavar="DURATION", help="spread each run over this long after its time"
    )
    p.add_argument(
        "--grace", metavar="DURATION", help="how late a run still counts as on time (60s)"
    )
    p.add_argument("--name", help="a name to list it by")
    p.set_defaults(func=cmd_add)

    p = ss.add_parser("ls", parents=[common], help="list schedules with their next times")
    p.add_argument("--agent", metavar="AGENT", help="only this agent's")
    p.set_defaults(func=cmd_ls)

    p = ss.add_parser("show", parents=[common], help="a schedule, its next times and its firings")
    p.add_argument("schedule_id", metavar="ID")
    p.set_defaults(func=cmd_show)

    for name, what in (("pause", "fire nothing until resumed"),
                       ("resume", "fire again from the next time after now"),
                       ("rm", "remove a schedule (journaled on its agent)")):  # fmt: skip
        p = ss.add_parser(name, parents=[common], help=what)
        p.add_argument("schedule_id", metavar="ID")
        p.set_defaults(func=cmd_change, change=name)


_FLAGS = ("cron", "every", "at", "tz", "start", "message", "catch_up", "max_catch_up", "overlap",
          "jitter", "grace", "name")  # fmt: skip


def cmd_add(args: argparse.Namespace) -> int:
    fields = {k: getattr(args, k) for k in _FLAGS if getattr(args, k) is not None}
    with runtime_for(args) as rt:
        book = Schedules(rt)
        if args.spec is not None:
            record = book.add(spec=load_spec(args.spec), **fields)
        else:
            record = book.add(agent_id=args.agent_id, **fields)
        view = book.view(record)
    if wants_json(args):
        emit_json(view.to_json())
        return EXIT_COMPLETED
    shown = view.to_json()
    target = f"agent {record.agent_id}" if record.agent_id else f"a fresh {shown['spec']}"
    out.print(f"added schedule {record.schedule_id}: {shown['when']}, {target}", markup=False)
    _upcoming(shown)
    return EXIT_COMPLETED


def _upcoming(shown: dict[str, Any]) -> None:
    if shown["paused"]:
        out.print("paused")
    elif not shown["upcoming"]:
        out.print("no more times")
    else:
        out.print("next: " + ", ".join(iso(t) for t in shown["upcoming"]))


def cmd_ls(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        book = Schedules(rt)
        listed = [book.view(r).to_json() for r in book.list(args.agent)]
    if wants_json(args):
        emit_json(listed)
        return EXIT_COMPLETED
    if not listed:
        out.print("no schedules")
    for s in listed:
        target = s["agent_id"] or f"fresh {s['spec']}"
        due = "paused" if s["paused"] else (iso(s["next_due"]) if s["next_due"] else "done")
        out.print(f"{s['schedule_id']}  {target}  {s['when']}  next: {due}  runs: {s['runs']}",
                  markup=False)  # fmt: skip
    return EXIT_COMPLETED


def cmd_show(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        book = Schedules(rt)
        shown = book.view(book.get(args.schedule_id), count=5).to_json()
        firings: list[dict[str, Any]] = [
            {"due": f.due, "state": f.state, "count": f.count, "agent_id": f.agent_id,
             "detail": f.detail, "done_at": f.done_at}
            for f in book.firings(args.schedule_id)
        ]  # fmt: skip
    if wants_json(args):
        emit_json({**shown, "firings": firings})
        return EXIT_COMPLETED
    out.print(f"{shown['schedule_id']}  {shown['when']}  made by {shown['made_by']}", markup=False)
    out.print(f"target: {shown['agent_id'] or 'a fresh agent from spec ' + str(shown['spec'])}",
              markup=False)  # fmt: skip
    out.print(f"catch-up {shown['definition'].get('catch_up')}, overlap "
              f"{shown['definition'].get('overlap')}, runs {shown['runs']}")  # fmt: skip
    _upcoming(shown)
    for f in firings:
        many = f" x{f['count']}" if f["count"] > 1 else ""
        out.print(f"  {iso(f['due'])}  {f['state']}{many}  {f['agent_id'] or ''}  {f['detail']}",
                  markup=False)  # fmt: skip
    return EXIT_COMPLETED


def cmd_change(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        book = Schedules(rt)
        if args.change == "rm":
            book.remove(args.schedule_id)
            shown: dict[str, Any] = {"schedule_id": args.schedule_id, "removed": True}
        else:
            changed = (
                book.pause(args.schedule_id)
                if args.change == "pause"
                else book.resume(args.schedule_id)
            )
            shown = book.view(changed).to_json()
    if wants_json(args):
        emit_json(shown)
    elif args.change == "rm":
        out.print(f"removed schedule {args.schedule_id}")
    else:
        out.print(
            f"{'paused' if args.change == 'pause' else 'resumed'} schedule {args.schedule_id}"
        )
        _upcoming(shown)
    return EXIT_COMPLETED
