"""``stead memories``: an agent's long-term memories, listed, added, corrected, forgotten."""

from __future__ import annotations

import argparse
from typing import Any

from ..clock import iso
from ..memories.person import Memories
from ..store.memory_rows import MemoryRow
from .common import emit_json, err, out, runtime_for, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    top = sub.add_parser("memories", help="an agent's long-term memories (each change journaled)")
    ms = top.add_subparsers(dest="memories_command", required=True, metavar="COMMAND")

    p = ms.add_parser("list", parents=[common], help="the agent's memories and its tenant's shared")
    p.add_argument("agent_id", metavar="AGENT")
    p.set_defaults(func=cmd_list)

    p = ms.add_parser("recall", parents=[common], help="what the agent would recall for a query")
    p.add_argument("agent_id", metavar="AGENT")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=5, help="how many (1 to 20; default 5)")
    p.set_defaults(func=cmd_recall)

    p = ms.add_parser("add", parents=[common], help="save a memory you wrote (trusted)")
    p.add_argument("agent_id", metavar="AGENT")
    p.add_argument("text")
    p.add_argument("--shared", action="store_true", help="to the tenant's shared memory")
    p.set_defaults(func=cmd_add)

    p = ms.add_parser("correct", parents=[common], help="replace a memory's text (yours then)")
    p.add_argument("agent_id", metavar="AGENT")
    p.add_argument("memory_id", metavar="MEMORY")
    p.add_argument("text")
    p.set_defaults(func=cmd_correct)

    p = ms.add_parser("forget", parents=[common], help="erase a memory's text and vector")
    p.add_argument("agent_id", metavar="AGENT")
    p.add_argument("memory_id", metavar="MEMORY")
    p.set_defaults(func=cmd_forget)


def _row(row: MemoryRow) -> dict[str, Any]:
    return row.to_json()


def _print(rows: list[dict[str, Any]]) -> None:
    if not rows:
        err.print("no memories")
    for r in rows:
        score = f" {r['score']:.3f}" if "score" in r else ""
        line = f"{r['memory_id']}{score} [{r['source']}] {r['owner']} {iso(r['changed_at'])}"
        out.print(f"{line}: {r['text']}", markup=False, highlight=False)


def cmd_list(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        rows = [_row(m) for m in Memories(rt).list(args.agent_id)]
    emit_json({"memories": rows}) if wants_json(args) else _print(rows)
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        found = Memories(rt).recall(args.agent_id, args.query, args.k)
    rows = [{**_row(f.row), "score": round(f.score, 4)} for f in found]
    emit_json({"memories": rows}) if wants_json(args) else _print(rows)
    return 0


def _done(args: argparse.Namespace, row: MemoryRow, did: str) -> int:
    if wants_json(args):
        emit_json(_row(row))
    else:
        err.print(f"memory {row.memory_id} {did} (journaled on agent {args.agent_id})")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        row = Memories(rt).add(args.agent_id, args.text, shared=args.shared)
    return _done(args, row, "saved")


def cmd_correct(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        row = Memories(rt).correct(args.agent_id, args.memory_id, args.text)
    return _done(args, row, "corrected")


def cmd_forget(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        row = Memories(rt).forget(args.agent_id, args.memory_id)
    return _done(args, row, "forgotten")
