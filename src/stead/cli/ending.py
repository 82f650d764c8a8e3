"""``stead cancel``, ``stead rm`` and ``stead gc``: ending agents and what they left."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..snapshots import retention
from ..store.collect import GRACE
from .common import EXIT_COMPLETED, emit_json, err, runtime_for, seconds, tenant_of, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "cancel", parents=[common], help="end an agent for good, whatever it is doing"
    )
    p.add_argument("agent_id")
    p.add_argument("--reason", required=True, help="why (journaled with who cancelled it)")
    p.set_defaults(func=cmd_cancel)
    p = sub.add_parser(
        "rm", parents=[common], help="delete an agent: its journal, state and workspace"
    )
    p.add_argument("agent_id")
    p.add_argument(
        "--export",
        type=Path,
        default=None,
        metavar="FILE",
        help="write its signed archive to FILE first (nothing is deleted if that fails)",
    )
    p.set_defaults(func=cmd_rm)
    p = sub.add_parser(
        "gc",
        parents=[common],
        help="delete finished agents past a retention, then blobs nothing refers to",
    )
    p.add_argument(
        "--finished-older-than",
        type=days,
        default=None,
        metavar="DAYS",
        help="first delete agents finished (completed, failed, cancelled, moved) more than "
        "DAYS ago; by default no agent is deleted",
    )
    p.add_argument(
        "--grace",
        type=seconds,
        default=GRACE,
        metavar="SECONDS",
        help=f"spare blobs stored less than this long ago (default {GRACE:.0f}: a day), "
        "which a step may be about to name",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    p.set_defaults(func=cmd_gc)


def cmd_cancel(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        state = rt.cancel(args.agent_id, args.reason)
    if wants_json(args):
        emit_json({"agent_id": state.agent_id, "status": state.status,
                   "reason": state.status_reason, "version": state.version})  # fmt: skip
    else:
        err.print(f"{state.agent_id} {state.status_reason}", markup=False)
    return EXIT_COMPLETED


def cmd_rm(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        done = retention.delete(rt, args.agent_id, args.export)
    if wants_json(args):
        emit_json(done)
    else:
        kept = f"; its archive is {done['exported']}" if done["exported"] else ""
        err.print(
            f"deleted {done['agent_id']} ({done['name']}){kept}; `stead gc` collects the "
            "content nothing else refers to",
            markup=False,
        )
    return EXIT_COMPLETED


def days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days") from None
    if not 0 <= value <= 36500:
        raise argparse.ArgumentTypeError("DAYS is from 0 to 36500")
    return value * 86400


def cmd_gc(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        done = retention.gc(rt, args.finished_older_than, args.grace, args.dry_run, tenant_of(args))
    if wants_json(args):
        emit_json(done)
        return EXIT_COMPLETED
    verb = "would delete" if args.dry_run else "deleted"
    agents, blobs, kept = len(done["agents"]), done["blobs"], done["kept"]
    err.print(
        f"{verb} {agents} finished agent{'s' if agents != 1 else ''} and {blobs} "
        f"blob{'s' if blobs != 1 else ''} ({done['bytes']:,} bytes); {kept} "
        f"blob{'s' if kept != 1 else ''} kept",
        markup=False,
    )
    return EXIT_COMPLETED
