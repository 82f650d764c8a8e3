"""What every command shares: options, opening the runtime, output, exit codes."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..errors import UsageError
from ..governance.grants import MAX_VALID_SECONDS
from ..ids import check_id
from ..runtime.runtime import Runtime
from ..state import State
from ..store import DEFAULT_URL, data_dir_for, open_store
from ..summaries import shown

EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STOPPED = 3
EXIT_BUSY = 4

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def common_options() -> argparse.ArgumentParser:
    """Options every command accepts, before or after the command name."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--store",
        default=argparse.SUPPRESS,
        metavar="URL",
        help=f"store URL (default: $STEAD_STORE or {DEFAULT_URL})",
    )
    p.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="folder for blobs and workspaces (default: beside a SQLite store, or $STEAD_DATA_DIR)",
    )
    p.add_argument(
        "--blobs",
        default=argparse.SUPPRESS,
        metavar="URL",
        help="where workspaces' content is kept, for every host that runs the agents: "
        "file:///PATH, postgresql://HOST/DB?schema=NAME or s3://BUCKET/PREFIX "
        "(default: $STEAD_BLOBS, else DATA_DIR/blobs on this host)",
    )
    p.add_argument(
        "--tenant",
        default=argparse.SUPPRESS,
        metavar="T",
        help="act as tenant T only: other tenants' agents and secrets are not found "
        "(default: $STEAD_TENANT, else every tenant, as the operator)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print machine-readable JSON instead of text for people",
    )
    return p


MAX_INT64 = 2**63 - 1
"""The largest number a store keeps (a version, an event's position)."""


def whole(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``, in ASCII digits (a
    number past what the option can mean is a mistake, never taken as given)."""

    def parse(text: str) -> int:
        digits = text.strip().removeprefix("-")
        value = int(text) if digits.isascii() and digits.isdigit() and len(digits) < 30 else None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from {low} to {high}")
        return value

    parse.__name__ = "whole number"  # argparse names the type by it in its own errors
    return parse


position = whole(0, MAX_INT64)
"""An argparse type: an agent's version, or an event's place in its journal."""


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < MAX_VALID_SECONDS:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds, 0 or more and under 10 years"
        )
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def store_url(args: argparse.Namespace) -> str:
    return str(getattr(args, "store", None) or os.environ.get("STEAD_STORE") or DEFAULT_URL)


def tenant_of(args: argparse.Namespace) -> str | None:
    """The tenant a command acts as, or None for the operator (every tenant).

    Only the absence of both ``--tenant`` and ``$STEAD_TENANT`` means the
    operator: an empty one is a mistake (an unset variable in a script, say), and
    taking it for the operator would show and let it act on every tenant.
    """
    tenant = getattr(args, "tenant", None)
    where = "--tenant"
    if tenant is None:
        tenant, where = os.environ.get("STEAD_TENANT"), "$STEAD_TENANT"
    if tenant is None:
        return None
    if not tenant.strip():
        raise UsageError(
            f"{where} is empty; name a tenant, or leave {where} out to act as the operator"
        )
    return check_id(tenant, where)


def wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


@contextmanager
def runtime_for(args: argparse.Namespace, reads_only: bool = False) -> Iterator[Runtime]:
    """The runtime a command acts through, closed when the ``with`` block is left,
    however it is left; a command that ``reads_only`` makes no store."""
    url = store_url(args)
    data_dir = data_dir_of(args, url, str(Path(".stead").resolve()))
    tenant = tenant_of(args)
    blobs = blobs_of(args)
    rt = Runtime(open_store(url, create=not reads_only), data_dir, tenant=tenant, blobs=blobs)
    try:
        yield rt
    finally:
        rt.close()


_KERNEL = (Path("/proc"), Path("/sys"), Path("/dev"))
"""File systems of the kernel's own: nothing of stead's can live there."""


def data_dir_of(args: argparse.Namespace, url: str, default: str) -> str:
    """The data folder (``--data-dir``, ``$STEAD_DATA_DIR``, beside a SQLite store, else
    ``default``), refused before anything is made when it cannot be stead's (see
    :func:`_own_folder`)."""
    flag = getattr(args, "data_dir", None)
    named = flag or os.environ.get("STEAD_DATA_DIR")
    folder = named or data_dir_for(url) or default
    where = "--data-dir" if flag else "$STEAD_DATA_DIR" if named else "the data folder"
    return _own_folder(folder, f"{where} {folder}", "workspaces and blobs")


def blobs_of(args: argparse.Namespace) -> str | None:
    """The blob store's URL (``--blobs``, ``$STEAD_BLOBS``, else None: the data
    folder's); a folder is held to what a data folder is (see :func:`_own_folder`)."""
    flag = getattr(args, "blobs", None)
    url = flag or os.environ.get("STEAD_BLOBS") or None
    if url is not None and ("://" not in url or url.startswith("file:")):
        folder = urllib.parse.unquote(urllib.parse.urlsplit(url).path) if "://" in url else url
        _own_folder(folder, f"{'--blobs' if flag else '$STEAD_BLOBS'} {url}", "blobs")
    return url


def _own_folder(folder: str, where: str, what: str) -> str:
    """``folder``, unless it cannot be stead's: the root of the file system (stead's
    folders would be made in ``/``), a folder of the kernel's own (``/proc``,
    ``/sys``, ``/dev``), or a file; refused before anything is made."""
    real = Path(os.path.realpath(folder))
    if real == Path("/"):
        problem = "is the root of the file system"
    elif any(real == k or k in real.parents for k in _KERNEL):
        problem = "is in a file system of the kernel's own"
    elif real.exists() and not real.is_dir():
        problem = "is not a folder"
    else:
        return folder
    raise UsageError(
        f"{where} {problem}; name a folder for stead's {what}, such as /var/lib/stead "
        "(it is made if missing)"
    )


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def exit_code_for(state: State) -> int:
    if state.status == "completed":
        return EXIT_COMPLETED
    if state.status == "failed":
        return EXIT_FAILED
    return EXIT_STOPPED


def status_style(status: str) -> str:
    return {
        "completed": "green",
        "failed": "red",
        "cancelled": "red",
        "needs_attention": "yellow",
        "waiting": "cyan",
        "running": "blue",
        "queued": "yellow",
        "hibernated": "magenta",
        "moved": "white",
    }.get(status, "white")


def describe_stop(state: State) -> list[str]:
    """Lines telling a person why an agent stopped and what they can do."""
    agent = state.agent_id
    lines = [
        f"agent {agent} ({state.name}) is [{status_style(state.status)}]"
        f"{state.status}[/] at version {state.version}"
    ]
    if state.status_reason:
        # the agent's words: neither markup nor a terminal's escapes
        lines.append(f"  reason: {escape(shown(state.status_reason))}")
    for call_id, call in sorted(state.unknown.items()):
        lines.append(
            f"  outcome unknown: {call_id} {escape(shown(str(call.get('tool'))))}"
            f"({escape(json.dumps(call.get('args'), sort_keys=True))})"
        )
        lines.append(f"    decide with: stead resolve {agent} {call_id} --as done|retry|abort")
    asleep = state.hibernated if state.status == "hibernated" else None
    slept_in = (asleep or {}).get("status", state.status)
    if asleep is not None:
        why = asleep.get("status_reason") or ""
        lines.append(f"  asleep while {slept_in}" + (f": {escape(shown(why))}" if why else ""))
    for vid, v in sorted(state.violations.items()):
        lines.append(f"  violation {vid} ({v.get('rule')}): {v.get('message', '')}")
        lines.append(f'    clear with: stead clear {agent} {vid} --reason "..."')
    if slept_in == "waiting" and state.waiting_for == "input":
        lines.append(f'  reply with: stead send {agent} "TEXT"' + (" (wakes it)" if asleep else ""))
    for aid, a in sorted(state.approvals.items()):
        if a["status"] == "requested":
            lines.append(f"  approval {aid} asked for {a['tool']}: {a.get('reason', '')}")
            lines.append(
                f"    answer with: stead approve {aid} [--valid-for 15m]  or  "
                f'stead deny {aid} --reason "..."'
            )
    if state.timer is not None:
        due = state.timer["due_at"]
        lines.append(
            f"  timer {state.timer['timer_id']} due at {due:.0f}"
            + (" (a worker wakes it then)" if asleep else "")
        )
    if asleep is not None:
        lines.append(f"  restore it now with: stead wake {agent}")
    stuck = state.unknown or state.violations
    if state.status == "needs_attention" and not stuck:
        lines.append(f"  continue with: stead resume {agent}")
    return lines
