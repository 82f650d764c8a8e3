"""The demo's own tools: a slow formatter and a changelog outside the workspace."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..sandbox.paths import resolve_inside
from ..tools.base import Reconciled, ToolContext, tool

SLOW_ENV = "STEAD_DEMO_SLOW"
CHANGELOG_ENV = "STEAD_DEMO_CHANGELOG"

_REPORT = '''"""Daily sales report."""

from shop.pricing import compute_total


def daily_report(orders):
    totals = [compute_total(o) for o in orders]
    return {"orders": len(orders), "revenue": round(sum(totals), 2)}
'''


@tool(effect="idempotent")
def format_code(path: str, ctx: ToolContext) -> dict[str, object]:
    """Rename calc_total in a file and format it (slowly, like a real formatter)."""
    target = resolve_inside(ctx.workspace, path)
    target.write_text(_REPORT, encoding="utf-8")
    if os.environ.get(SLOW_ENV):
        time.sleep(30)  # the demo kills the worker during this
    return {"path": path, "formatted": True}


def _changelog() -> Path:
    return Path(os.environ.get(CHANGELOG_ENV, "changelog.txt"))


def _already_posted(args: dict[str, object], ctx: ToolContext) -> Reconciled:
    lines = _changelog().read_text(encoding="utf-8").splitlines() if _changelog().exists() else []
    done = any(line.endswith(f"[{ctx.idempotency_key}]") for line in lines)
    return Reconciled("done" if done else "not_done")


@tool(effect="effectful", reconcile=_already_posted)
def post_changelog(entry: str, ctx: ToolContext) -> dict[str, object]:
    """Append an entry to the team's changelog, which lives outside the workspace."""
    with open(_changelog(), "a", encoding="utf-8") as fh:
        fh.write(f"{entry} [{ctx.idempotency_key}]\n")
    return {"posted": entry}


def no_calc_total_left(state: object, workspace: Path) -> tuple[bool, str]:
    """The rename goal's acceptance check: no Python file still says calc_total."""
    left = sorted(
        str(p.relative_to(workspace))
        for p in workspace.rglob("*.py")
        if "calc_total" in p.read_text(encoding="utf-8", errors="replace")
    )
    return not left, f"calc_total still in {', '.join(left)}" if left else "none left"
