"""``stead doctor``: what isolation this machine can give, and why; and whether the
vault key file is open to anyone but its owner."""

from __future__ import annotations

import argparse

from rich.markup import escape

from ..sandbox.report import report
from ..sandbox.secrets import key_file_warning
from ..sandbox.select import OPT_IN
from .common import EXIT_COMPLETED, EXIT_FAILED, emit_json, out, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "doctor", parents=[common], help="report the isolation command tools get on this machine"
    )
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    isolation, why = report()
    warning = key_file_warning()
    if wants_json(args):
        emit_json(
            {
                "sandbox": isolation.sandbox if isolation else None,
                "isolated": bool(isolation and isolation.isolated),
                "namespaces": list(isolation.namespaces) if isolation else [],
                "limits": list(isolation.limits) if isolation else [],
                "notes": list(isolation.notes) if isolation else [],
                "problem": why or None,
                "warnings": [warning] if warning else [],
            }
        )
    elif isolation is None:
        out.print(f"[red]no sandbox[/]: {why}")
        out.print(
            f"command tools (shell) are refused; set {OPT_IN}=1 to run them without isolation"
        )
    else:
        colour = "green" if isolation.isolated else "yellow"
        out.print(
            f"[{colour}]{isolation.sandbox}[/]: "
            + ("commands are isolated" if isolation.isolated else "NO isolation")
        )
        if isolation.namespaces:
            out.print("  new namespaces: " + ", ".join(isolation.namespaces))
        out.print("  limits: " + ", ".join(isolation.limits))
        for note in isolation.notes:
            out.print(f"  note: {note}")
        if why:
            out.print(f"  why not sandboxed: {why}")
    if warning and not wants_json(args):
        out.print(f"[yellow]warning[/]: {escape(warning)}")
    return EXIT_COMPLETED if isolation is not None and isolation.isolated else EXIT_FAILED
