"""Tools for the chaos tests: each leaves a line in a ledger outside the workspace.

The ledger is the world outside the agent: a file whose path comes from
:data:`LEDGER_ENV`, that no workspace restore can roll back. Reading it after a
torture run tells how many times each effect really happened.

* ``append_plain`` is effectful with no reconcile hook: ``A <call_id>``.
* ``append_reconciled`` is effectful with a hook that looks for ``R <call_id>``.
* ``append_idempotent`` is idempotent: ``I <idempotency_key>``, written once per key.
* ``slow_idempotent`` sleeps (or waits for a file), then does the same with
  ``S <idempotency_key>``.
* ``write_slowly`` writes a workspace file in two halves with a pause between, so
  a kill can leave it torn; it touches no ledger (the workspace restore undoes it).

Each sleeps a little before and after its write so that a kill can land inside
the call, on either side of the effect.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from stead.tools import Reconciled, ToolContext, tool

LEDGER_ENV = "STEAD_TEST_LEDGER"
PAUSE_ENV = "STEAD_TEST_PAUSE"
"""Seconds to sleep before and after each write (default :data:`DEFAULT_PAUSE`)."""

DEFAULT_PAUSE = 0.01


def ledger_path() -> Path:
    path = os.environ.get(LEDGER_ENV)
    if not path:
        raise RuntimeError(f"{LEDGER_ENV} is not set; the chaos tools need a ledger file")
    return Path(path)


def ledger_lines(path: Path | None = None) -> list[str]:
    """The ledger's lines (empty if it does not exist yet)."""
    p = path or ledger_path()
    return p.read_text(encoding="utf-8").splitlines() if p.exists() else []


def _pause() -> None:
    time.sleep(float(os.environ.get(PAUSE_ENV, DEFAULT_PAUSE)))


def _append(line: str) -> None:
    # one small O_APPEND write: a kill leaves the line whole or absent, never half
    fd = os.open(ledger_path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


@tool(effect="effectful")
def append_plain(n: int, ctx: ToolContext) -> dict[str, object]:
    """Append ``A <call_id>`` to the ledger; nothing can tell afterwards if it ran."""
    _pause()
    _append(f"A {ctx.call_id}")
    _pause()
    return {"n": n, "line": f"A {ctx.call_id}"}


def _reconciled_line_present(args: dict[str, object], ctx: ToolContext) -> Reconciled:
    line = f"R {ctx.call_id}"
    if line in ledger_lines():
        return Reconciled("done", {"n": args.get("n"), "line": line, "found": True})
    return Reconciled("not_done")


@tool(effect="effectful", reconcile=_reconciled_line_present)
def append_reconciled(n: int, ctx: ToolContext) -> dict[str, object]:
    """Append ``R <call_id>`` to the ledger; its reconcile hook looks for that line."""
    _pause()
    _append(f"R {ctx.call_id}")
    _pause()
    return {"n": n, "line": f"R {ctx.call_id}"}


def _append_once(prefix: str, key: str) -> bool:
    line = f"{prefix} {key}"
    if line in ledger_lines():
        return False
    _append(line)
    return True


@tool(effect="idempotent")
def append_idempotent(n: int, ctx: ToolContext) -> dict[str, object]:
    """Append ``I <idempotency_key>`` unless a line with that key is already there."""
    _pause()
    wrote = _append_once("I", ctx.idempotency_key)
    _pause()
    return {"n": n, "wrote": wrote}


@tool(effect="idempotent")
def slow_idempotent(
    seconds: float, ctx: ToolContext, until: str | None = None
) -> dict[str, object]:
    """Sleep ``seconds`` (or, given ``until``, until that file exists, ``seconds`` at
    most), then append ``S <idempotency_key>`` once per key."""
    if until is None:
        time.sleep(seconds)
    else:  # held until the test says, not for a time a loaded machine may outlast
        deadline = time.monotonic() + seconds
        while not Path(until).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    wrote = _append_once("S", ctx.idempotency_key)
    return {"slept": seconds, "wrote": wrote}


@tool(effect="idempotent")
def write_slowly(path: str, content: str, ctx: ToolContext) -> dict[str, object]:
    """Write a workspace file in two halves, pausing between and after them."""
    target = ctx.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    half = len(content) // 2
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(content[:half])
        fh.flush()
        _pause()
        fh.write(content[half:])
    _pause()
    return {"path": path, "chars": len(content)}
