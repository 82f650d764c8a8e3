"""``stead``: the command line entry point.

Exit codes: 0 the agent completed (or the command succeeded), 1 it failed (or a
check failed), 2 bad usage or bad input, 3 it stopped waiting or needing
attention, 4 another worker holds the agent's lease.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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
    ToolError,
    UsageError,
)
from . import (
    agents,
    demo,
    doctor,
    governance,
    hibernation,
    inspect,
    integrity,
    secret,
    selftest,
    work,
)
from .common import EXIT_BUSY, EXIT_FAILED, EXIT_USAGE, common_options, err


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="stead",
        parents=[common],
        description="Run long-lived AI agents that survive crashes, restarts and moves.",
        epilog="Exit codes: 0 completed · 1 failed · 2 bad usage or input · "
        "3 waiting or needs attention · 4 another worker holds the lease",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    agents.register(sub, common)
    inspect.register(sub, common)
    work.register(sub, common)
    governance.register(sub, common)
    integrity.register(sub, common)
    hibernation.register(sub, common)
    doctor.register(sub, common)
    secret.register(sub, common)
    selftest.register(sub, common)
    demo.register(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except LeaseHeld as exc:
        err.print(f"[yellow]busy[/]: {exc}")
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
    ) as exc:
        err.print(f"[red]error[/]: {exc}")
        return EXIT_USAGE
    except (ConcurrencyError, IntegrityError, StoreError, SteadError) as exc:
        err.print(f"[red]error[/]: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.print("interrupted; the agent resumes from its last committed step with `stead resume`")
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
