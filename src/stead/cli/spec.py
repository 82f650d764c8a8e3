"""``stead spec schema`` and ``stead spec check FILE...``: the spec's JSON Schema, and
every problem of a spec file at once, each with its line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape

from ..errors import SpecError
from ..speccheck import check_text, read_spec_file
from ..specschema import schema_text
from .common import EXIT_COMPLETED, EXIT_FAILED, EXIT_USAGE, emit_json, err, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("spec", help="check spec files; print the spec's JSON Schema")
    verbs = p.add_subparsers(dest="verb", required=True)
    s = verbs.add_parser(
        "schema",
        parents=[common],
        help="print the JSON Schema of agent specs (for editors: yaml-language-server)",
    )
    s.set_defaults(func=cmd_spec_schema)
    c = verbs.add_parser(
        "check",
        parents=[common],
        help="check spec files against the schema and read what they name; "
        "print each problem as FILE:LINE:COLUMN: field: what is wrong",
    )
    c.add_argument("files", nargs="+", metavar="FILE", help="agent spec files (YAML) to check")
    c.set_defaults(func=cmd_spec_check)


def cmd_spec_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(schema_text())
    return EXIT_COMPLETED


def cmd_spec_check(args: argparse.Namespace) -> int:
    code = EXIT_COMPLETED
    report: list[dict[str, object]] = []
    for name in args.files:
        try:
            text = read_spec_file(name)
        except SpecError as exc:
            err.print(f"[red]error[/]: {escape(' '.join(str(exc).split()))}")
            report.append({"file": name, "error": str(exc)})
            code = EXIT_USAGE
            continue
        problems = check_text(text, Path(name).parent)
        if problems and code == EXIT_COMPLETED:
            code = EXIT_FAILED
        if wants_json(args):
            report.append(
                {
                    "file": name,
                    "problems": [
                        {"line": p.line, "column": p.column, "field": p.field,
                         "message": p.message}
                        for p in problems
                    ],
                }
            )  # fmt: skip
            continue
        for problem in problems:
            sys.stdout.write(" ".join(problem.render(name).split()) + "\n")
        if not problems:
            sys.stdout.write(f"{name}: ok\n")
    if wants_json(args):
        emit_json(report)
    return code
