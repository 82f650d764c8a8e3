"""``stead eval``: run a suite of tasks under boundary conditions and report how the
agents kept to their work and their constraints; ``stead eval compare A B``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from rich.markup import escape

from ..canonical import strict_loads
from ..errors import UsageError
from .common import EXIT_FAILED, err, out

_COMPARE = "compare"


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "eval",
        help="run an eval suite (kills, hibernations, moves…) and report on it",
        description="Run every task of SUITE several times under each condition (a worker "
        "SIGKILLed mid-step, a hibernation, a move to another store, a model swap, a "
        "compaction, a grant lapse, a database restart) and report completion, adherence, "
        "repeated or lost effects, divergence from the uninterrupted baseline, and cost. "
        "`stead eval compare A B` compares two reports. Run the same command again to "
        "resume a killed eval.",
    )
    p.add_argument("suite", nargs="?", metavar="SUITE", help="the suite file (or `compare`)")
    p.add_argument(
        "reports",
        nargs="*",
        metavar="REPORT",
        help="with compare: two report.json files or eval folders",
    )
    p.add_argument(
        "--out", metavar="DIR", help="the eval's folder (default: stead-eval/SUITE-NAME here)"
    )
    p.add_argument("--runs", type=int, metavar="N", help="runs of each task per condition")
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="cells run at once (2)")
    p.add_argument(
        "--store",
        metavar="URL",
        help="one store for every cell, e.g. postgresql://… (default: a SQLite store per cell)",
    )
    p.add_argument("--model", metavar="MODEL", help="every task's model instead of its spec's")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="LABEL",
        help="run only these conditions (and the baseline); repeatable",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long one worker may run before the cell fails (600)",
    )
    p.add_argument(
        "--db-restart",
        metavar="COMMAND",
        help="db_restart restarts the database server with this command (e.g. "
        "'pg_ctlcluster 15 main restart'); without it, the worker's connections "
        "are dropped",
    )
    p.add_argument("--fresh", action="store_true", help="start the folder over")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if any condition repeats or loses an effect, ends differently "
        "from the baseline, or was not injected",
    )
    p.add_argument("--json", action="store_true", help="print the report (or comparison) as JSON")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    if args.suite is None:
        raise UsageError(
            "stead eval needs a suite file: stead eval SUITE, or stead eval compare A B"
        )
    if args.suite == _COMPARE:
        return _compare(args)
    if args.reports:
        raise UsageError("stead eval takes one suite; to compare reports: stead eval compare A B")
    if args.runs is not None and not 1 <= args.runs <= 100:
        raise UsageError("--runs must be from 1 to 100")
    if not 1 <= args.jobs <= 64:
        raise UsageError("--jobs must be from 1 to 64")
    if not args.timeout > 0:
        raise UsageError("--timeout must be a number of seconds above 0")
    from ..evals.aggregate import check
    from ..evals.runner import Options, run_eval
    from ..evals.suite import load_suite

    suite = load_suite(args.suite, runs=args.runs, model=args.model, only=tuple(args.only))
    folder = Path(args.out) if args.out else Path("stead-eval") / _folder_name(suite.name)
    options = Options(folder, args.store, args.jobs, args.fresh, args.timeout, args.db_restart)
    cells = suite.runs * sum(t.runs_under(c) for t in suite.tasks for c in suite.conditions)
    if not args.json:
        out.print(
            f"eval {escape(suite.name)}: {len(suite.tasks)} tasks x "
            f"{len(suite.conditions)} conditions x {suite.runs} runs = {cells} cells, "
            f"in {escape(str(folder))}"
        )
    try:
        summary = run_eval(suite, options, say=_quiet if args.json else _progress)
    except KeyboardInterrupt:
        err.print("interrupted; run the same command again to resume (finished cells are kept)")
        return 130
    failures = check(summary)
    if args.json:
        out.print_json(json.dumps(summary))
    else:
        for name in ("report.md", "report.html", "report.json"):
            out.print(f"wrote {escape(str(folder / name))}")
        for line in failures:
            err.print(f"[red]check[/]: {escape(line)}")
        if not failures:
            out.print(
                "[green]check[/]: no repeated or lost effect; every condition ended as "
                "its baseline and was injected"
            )
    return EXIT_FAILED if args.check and failures else 0


def _folder_name(name: str) -> str:
    """The suite's name as a folder name: letters, digits, '-', '_', '.' only."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "suite"


def _quiet(line: str) -> None:
    pass


def _progress(line: str) -> None:
    out.print(escape(line))


def _report(path: str) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    try:
        data = strict_loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the report {p}: {exc.strerror}") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{p} is not JSON ({exc}); name a stead eval report.json") from None
    if not isinstance(data, dict):
        raise UsageError(f"{p} is not a stead eval report; name a report.json")
    return data


def _compare(args: argparse.Namespace) -> int:
    if len(args.reports) != 2:
        raise UsageError("stead eval compare takes two reports: stead eval compare A B")
    from ..evals.compare import compare, compare_markdown

    result = compare(_report(args.reports[0]), _report(args.reports[1]))
    if args.json:
        out.print_json(json.dumps(result))
    else:
        out.print(compare_markdown(result), markup=False, highlight=False)
    return 0
