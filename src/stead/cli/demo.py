"""``stead demo``: the seed scenario, offline."""

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
        help="folder for the demo's store (emptied first; default .stead-demo)",
    )
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    try:
        return run_demo(Path(args.dir).resolve(), out)
    except DemoError as exc:
        err.print(f"[red]demo failed[/]: {exc}")
        return EXIT_FAILED
