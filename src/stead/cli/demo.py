"""``stead demo``: the seed scenario, offline, on the demo's own SQLite store or the
store ``--store URL`` names."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..demo.runner import run_demo
from ..errors import DemoError
from .common import EXIT_FAILED, err, out


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("demo", help="kill an agent's worker mid-step, resume it, explain")
    p.add_argument(
        "--dir",
        default=".stead-demo",
        help="folder for the demo's store and workspaces (emptied first; default "
        ".stead-demo); with --store URL (PostgreSQL too), the demo's agent is made in "
        "that store and only the workspaces are kept in the folder",
    )
    p.add_argument(
        "--store",
        default=argparse.SUPPRESS,  # also as given before the command: stead --store URL demo
        metavar="URL",
        help="run the demo on this store (sqlite:///PATH or postgresql://…; default: a "
        "SQLite store of its own in --dir, never $STEAD_STORE)",
    )
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    # only a store named here: the demo never writes into $STEAD_STORE unasked
    store = getattr(args, "store", None)
    try:
        return run_demo(Path(args.dir).resolve(), out, store)
    except DemoError as exc:
        err.print(f"[red]demo failed[/]: {exc}")
        return EXIT_FAILED
