"""``stead cancel``, ``stead rm`` and ``stead gc``: ending agents and what they left."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import EXIT_COMPLETED, emit_json, err, runtime_for, wants_json


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
        done = rt.delete(args.agent_id, args.export)
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
