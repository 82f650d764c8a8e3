"""``stead selftest isolation``: the context-bleed canary test, on this machine."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..selftest import isolation_selftest
from ..store import open_store
from .common import (
    EXIT_COMPLETED,
    EXIT_FAILED,
    emit_json,
    out,
    runtime_for,
    store_url,
    wants_json,
)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("selftest", help="check this machine's isolation with canaries")
    ss = p.add_subparsers(dest="selftest_command", required=True, metavar="COMMAND")
    q = ss.add_parser(
        "isolation",
        parents=[common],
        help="one tenant plants canaries, another probes for them; PASS or FAIL",
    )
    q.set_defaults(func=cmd_isolation)


def cmd_isolation(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:  # resolves the store URL and data folder as every command does
        data_dir = Path(rt.data_dir)
    store = open_store(store_url(args))
    try:
        report = isolation_selftest(store, data_dir)
    finally:
        store.close()
    if wants_json(args):
        emit_json(
            {
                "passed": report.passed,
                "checks": [{"check": n, "ok": ok, "evidence": e} for n, ok, e in report.checks],
            }
        )
    else:
        for name, ok, evidence in report.checks:
            out.print(f"{'[green]ok[/]  ' if ok else '[red]FAIL[/]'} {name}")
            if evidence:
                out.print(f"      evidence: {evidence}", markup=False)
        out.print("[green]PASS[/]" if report.passed else "[red]FAIL[/]")
    return EXIT_COMPLETED if report.passed else EXIT_FAILED
