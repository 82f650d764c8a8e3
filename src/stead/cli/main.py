"""``stead``: the command line entry point.

Exit codes: 0 the agent completed (or the command succeeded), 1 it failed (or a
check failed), 2 bad usage or bad input, 3 it stopped waiting or needing
attention, 4 another worker holds the agent's lease.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import NoReturn

from rich.markup import escape

from .. import __version__
from ..errors import (
    ConcurrencyError,
    GovernanceError,
    IntegrityError,
    LeaseHeld,
    NotFound,
    ResolveError,
    ScriptError,
    SecretError,
    SpecError,
    SteadError,
    StoreError,
    StoreUnusable,
    ToolError,
    UsageError,
)
from ..ids import check_id
from . import (
    agents,
    demo,
    doctor,
    ending,
    evals,
    governance,
    hibernation,
    inspect,
    integrity,
    mcp,
    memories,
    models,
    schedule,
    secret,
    selftest,
    serve,
    spec,
    upgrade,
    webhook,
    work,
)
from .common import EXIT_BUSY, EXIT_FAILED, EXIT_USAGE, common_options, err

# every argument that names something by id; each is checked as one (ids.check_id)
_ID_ARGS = (
    "agent_id",
    "call_id",
    "approval_id",
    "violation_id",
    "proposal_id",
    "snapshot_id",
    "grant_id",
    "goal_id",
    "agent",
    "schedule_id",
    "memory_id",
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit 2), not the whole usage."""

    def error(self, message: str) -> NoReturn:
        err.print(f"[red]error[/]: {_one_line(message)} (see {self.prog} --help)")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser: argparse.ArgumentParser = _Parser(
        prog="stead",
        parents=[common],
        description="Run long-lived AI agents that survive crashes, restarts and moves.",
        epilog="Exit codes: 0 completed · 1 failed · 2 bad usage or input · "
        "3 waiting or needs attention · 4 another worker holds the lease",
    )
    parser.add_argument("--version", action="version", version=f"stead {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    agents.register(sub, common)
    models.register(sub, common)
    mcp.register(sub, common)
    inspect.register(sub, common)
    work.register(sub, common)
    ending.register(sub, common)
    governance.register(sub, common)
    integrity.register(sub, common)
    hibernation.register(sub, common)
    doctor.register(sub, common)
    secret.register(sub, common)
    serve.register(sub, common)
    selftest.register(sub, common)
    demo.register(sub, common)
    webhook.register(sub, common)
    schedule.register(sub, common)
    spec.register(sub, common)
    upgrade.register(sub, common)
    memories.register(sub, common)
    evals.register(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader went away (`stead trace ID | head`): stop quietly; point stdout
        # at /dev/null so the interpreter's last flush does not fail again
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED


def _check_input(args: argparse.Namespace) -> None:
    """What argparse cannot check: ids."""
    for name in _ID_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and (value or name != "agent"):
            flag = "--id" if name == "agent_id" and args.command == "run" else name.upper()
            check_id(value, flag)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv):
        if not _is_text(arg):  # bytes the shell passed that are not UTF-8 (or a lone surrogate)
            err.print(f"[red]error[/]: argument {i + 1} is not UTF-8 text (or holds a NUL)")
            return EXIT_USAGE
    args = parser.parse_args(argv)
    try:
        _check_input(args)
        code: int = args.func(args)
    except LeaseHeld as exc:
        err.print(f"[yellow]busy[/]: {_one_line(exc)}")
        return EXIT_BUSY
    except (
        UsageError,
        SpecError,
        ScriptError,
        SecretError,
        NotFound,
        ResolveError,
        ToolError,
        GovernanceError,
        StoreUnusable,
    ) as exc:
        err.print(f"[red]error[/]: {_one_line(exc)}")
        return EXIT_USAGE
    except sqlite3.DatabaseError as exc:
        # a store file damaged after it was opened: say so, rather than a traceback
        err.print(f"[red]error[/]: the store cannot be read: {_one_line(exc)}")
        return EXIT_FAILED
    except (ConcurrencyError, IntegrityError, StoreError, SteadError) as exc:
        err.print(f"[red]error[/]: {_one_line(exc)}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.print("interrupted; the agent resumes from its last committed step with `stead resume`")
        return 130
    return code


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


def _one_line(exc: BaseException | str) -> str:
    """An error's message on one line, with no markup of its own (it may quote input),
    and printable whatever it quotes (a lone surrogate is shown escaped)."""
    text = " ".join(str(exc).split()).encode("utf-8", "backslashreplace").decode("utf-8")
    return escape(text)


if __name__ == "__main__":
    sys.exit(main())
