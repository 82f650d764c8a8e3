"""``stead doctor``: what isolation this machine can give, and why; whether the
vault key file is open to anyone but its owner; and the store's schema: its
version, the stead that made it and the one that last migrated it (read without
migrating it, so that it can be asked before an upgrade)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from rich.markup import escape

from ..errors import SteadError
from ..sandbox.report import report
from ..sandbox.secrets import key_file_warning
from ..sandbox.select import OPT_IN
from ..store.peek import peek, shown
from ..version import __version__
from .common import EXIT_COMPLETED, EXIT_FAILED, emit_json, out, store_url, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "doctor",
        parents=[common],
        help="report the isolation command tools get on this machine, and the store's schema",
    )
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    isolation, why = report()
    warning = key_file_warning()
    store = _store(store_url(args))
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
                "store": store,
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
    if not wants_json(args) and not store["url"].startswith("memory:"):
        _print_store(store)
    if warning and not wants_json(args):
        out.print(f"[yellow]warning[/]: {escape(warning)}")
    return EXIT_COMPLETED if isolation is not None and isolation.isolated else EXIT_FAILED


def _store(url: str) -> dict[str, Any]:
    """What the store at ``url`` says of its schema, as the JSON output gives it."""
    where = shown(url)
    try:
        info = peek(url)
    except SteadError as exc:  # a missing extra or a bad URL too: the rest still reports
        return {"url": where, "problem": str(exc)}
    if info is None:
        return {"url": where, "schema_version": None}
    return {
        "url": where,
        "schema_version": info.schema_version,
        "understands": info.understands,
        "stead": __version__,
        "made_by": info.made_by,
        "last_migrated_by": info.last.stead_version if info.last else None,
        "last_migrated_at": info.last.applied_at if info.last else None,
    }


def _print_store(store: dict[str, Any]) -> None:
    where = escape(str(store["url"]))
    if "problem" in store:
        out.print(f"[red]store[/] {where}: {escape(store['problem'])}")
        return
    if store["schema_version"] is None:
        out.print(f"store {where}: none there yet (the first command that writes makes it)")
        return
    version, understands = store["schema_version"], store["understands"]
    colour = "green" if version == understands else "yellow"
    out.print(f"[{colour}]store[/] {where}: schema version {version}")
    made, last = store["made_by"], store["last_migrated_by"]
    out.print(
        f"  made by stead {escape(made)}"
        if made
        else "  made before stead kept a store's history (schema versions before it are unrecorded)"
    )
    if last:
        at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(store["last_migrated_at"]))
        out.print(f"  last migrated by stead {escape(last)} at {at}")
    if version > understands:
        out.print(
            f"  [red]newer than this stead ({__version__}) understands[/] (up to "
            f"{understands}): upgrade stead to at least {escape(last or 'the one that made it')}"
        )
    elif version < understands:
        out.print(
            f"  older than this stead ({__version__}) writes ({understands}): the next "
            "command that opens it migrates it; back it up first (docs/how-to/upgrading-a-store.md)"
        )
