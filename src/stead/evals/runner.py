"""Running a whole suite: every cell, in parallel, resumable, within a budget.

The eval's folder holds ``eval.json`` (which suite, on which store), the vault
key its agents' completions are certified with, a folder per cell and, once
every cell has run, the reports. The baseline cells run first: the default
point of every other condition is the middle decision of its baseline run.
A killed eval is resumed by running it again on the same folder: finished cells
(those with a ``cell.json``) are kept, the rest are emptied and run again. A
suite that changed since the folder was started is refused, so one report never
mixes two suites.
"""

from __future__ import annotations

import base64
import json
import os
import random
import secrets
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..canonical import strict_loads
from ..errors import UsageError
from .aggregate import aggregate
from .cell import CellPlan, run_cell
from .render_html import html
from .render_md import markdown
from .suite import MID_STEP, Condition, Suite, Task

FORMAT = "stead-eval/1"


@dataclass(frozen=True)
class Options:
    out: Path
    store: str | None = None
    jobs: int = 2
    fresh: bool = False
    timeout: float = 600.0
    restart: str | None = None
    """The command that restarts the database server, for db_restart (else the
    workers' connections are dropped)."""


def _spent(cells: list[dict[str, Any]]) -> tuple[float, float]:
    usd = tokens = 0.0
    for c in cells:
        cost = (c.get("metrics") or {}).get("cost") or {}
        usd += float(cost.get("spend") or 0)
        tokens += float(cost.get("tokens") or 0)
    return usd, tokens


class _Eval:
    def __init__(self, suite: Suite, options: Options, say: Callable[[str], None]) -> None:
        self.suite, self.options, self.say = suite, options, say
        self.out = options.out
        self.lock = threading.Lock()
        self.cells: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.skipped: list[str] = []
        self.key = self._open()

    @property
    def shown_store(self) -> str | None:
        return None if self.options.store is None else _shown(self.options.store)

    def _open(self) -> str:
        out, suite = self.out, self.suite
        head = out / "eval.json"
        if head.exists() and self.options.fresh:
            try:
                shutil.rmtree(out)
            except OSError as exc:  # a link, or a file it may not remove: say so, keep the rest
                raise UsageError(
                    f"cannot start {out} afresh: {exc}; name a new --out folder"
                ) from None
        if head.exists():
            try:
                known = strict_loads(head.read_text(encoding="utf-8"))
            except (ValueError, RecursionError):
                known = {}
            if not isinstance(known, dict) or known.get("format") != FORMAT:
                raise UsageError(f"{out} holds no stead eval; name a new --out folder")
            if known.get("digest") != suite.digest or known.get("store") != self.shown_store:
                raise UsageError(
                    f"{out} holds an eval of another suite, or of this suite before it changed "
                    "(or on another store); name a new --out folder, or add --fresh to start over"
                )
        elif out.exists() and any(out.iterdir()):
            raise UsageError(f"{out} is not empty and holds no stead eval; name a new --out folder")
        out.mkdir(parents=True, exist_ok=True)
        key_file = out / "vault.key"
        if not key_file.exists():
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(base64.b64encode(secrets.token_bytes(32)).decode())
        if not head.exists():
            head.write_text(
                json.dumps(
                    {
                        "format": FORMAT,
                        "suite": str(suite.path),
                        "name": suite.name,
                        "digest": suite.digest,
                        "store": self.shown_store,
                    },
                    indent=1,
                ),
                encoding="utf-8",
            )
        return key_file.read_text(encoding="ascii").strip()

    def folder(self, task: Task, condition: Condition, run: int) -> Path:
        return self.out / "cells" / task.id / condition.label / str(run)

    def done(self, folder: Path) -> dict[str, Any] | None:
        try:
            record = strict_loads((folder / "cell.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return record if isinstance(record, dict) and record.get("format") else None

    def plan(self, task: Task, condition: Condition, run: int) -> CellPlan | None:
        """The cell to run, or None when it is finished already or over budget."""
        folder = self.folder(task, condition, run)
        found = self.done(folder)
        if found is not None:
            with self.lock:
                self.cells[(task.id, condition.label, run)] = found
            return None
        if folder.exists() or folder.is_symlink():  # a cell the eval was killed in: afresh
            try:
                shutil.rmtree(folder)
            except OSError as exc:
                raise UsageError(f"cannot run cell {folder} again: {exc}") from None
        usd, tokens = self.left()
        if (usd is not None and usd <= 0) or (tokens is not None and tokens <= 0):
            self.skipped.append(f"{task.id}/{condition.label}/{run}")
            return None
        return CellPlan(
            task,
            condition,
            run,
            self.point(task, condition, run),
            folder,
            self.key,
            self.options.store,
            self.options.timeout,
            usd,
            tokens,
            self.options.restart,
        )

    def left(self) -> tuple[float | None, float | None]:
        with self.lock:
            usd, tokens = _spent(list(self.cells.values()))
        s = self.suite
        return (
            None if s.budget_usd is None else s.budget_usd - usd,
            None if s.budget_tokens is None else s.budget_tokens - tokens,
        )

    def point(self, task: Task, condition: Condition, run: int) -> int | None:
        """Where the boundary falls: the suite's decision, else from the baseline run
        of the same number: its middle decision, or a seeded random one; a mid-step
        boundary only at a decision whose call journaled an intent."""
        if condition.kind == "baseline":
            return None
        if isinstance(condition.at, int):
            return condition.at
        base = self.cells.get((task.id, "baseline", run))
        base = base or self.cells.get((task.id, "baseline", 0)) or {}
        metrics = base.get("metrics") or {}
        decisions = int((metrics.get("cost") or {}).get("decisions") or 2)
        points = list(range(1, max(2, decisions)))
        if condition.kind in MID_STEP:
            points = [int(p) for p in metrics.get("intent_points") or []] or points
        if condition.at == "random":
            rng = random.Random(f"{self.suite.seed}:{task.id}:{condition.label}:{run}")
            return rng.choice(points)
        middle = max(1, decisions // 2)
        return next((p for p in points if p >= middle), points[-1])

    def run_all(self, plans: list[CellPlan]) -> None:
        def one(plan: CellPlan) -> None:
            record = run_cell(plan)
            with self.lock:
                self.cells[(plan.task.id, plan.condition.label, plan.run)] = record
            what = (record.get("not_applicable") and "n/a") or record.get("error") or "done"
            self.say(f"{plan.task.id} / {plan.condition.label} / run {plan.run + 1}: {what}")

        with ThreadPoolExecutor(max_workers=max(1, self.options.jobs)) as pool:
            for future in [pool.submit(one, p) for p in plans]:
                future.result()

    def phase(self, baseline: bool) -> None:
        plans = []
        for task in self.suite.tasks:
            for condition in self.suite.conditions:
                if (condition.kind == "baseline") != baseline or not task.runs_under(condition):
                    continue
                for run in range(self.suite.runs):
                    plan = self.plan(task, condition, run)
                    if plan is not None:
                        plans.append(plan)
        self.run_all(plans)


def run_eval(
    suite: Suite, options: Options, say: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Run (or resume) the suite into ``options.out``; the summary, also written as
    ``report.json``, ``report.md`` and ``report.html`` there."""
    ev = _Eval(suite, options, say)
    ev.phase(baseline=True)
    ev.phase(baseline=False)
    order = {c.label: i for i, c in enumerate(suite.conditions)}
    tasks = {t.id: i for i, t in enumerate(suite.tasks)}
    cells = sorted(
        ev.cells.values(),
        key=lambda c: (tasks.get(c["task"], 0), order.get(c["condition"], 0), c["run"]),
    )
    info = {
        "name": suite.name,
        "suite": str(suite.path),
        "digest": suite.digest,
        "runs": suite.runs,
        "store": "sqlite (one store per cell)" if options.store is None else _shown(options.store),
        "conditions": [c.to_json() for c in suite.conditions],
        "tasks": [t.id for t in suite.tasks],
        "skipped": ev.skipped,
        "budget": {"usd": suite.budget_usd, "tokens": suite.budget_tokens},
    }
    summary = aggregate(cells, info)
    (options.out / "report.json").write_text(
        json.dumps(summary, indent=1, sort_keys=True), encoding="utf-8"
    )
    (options.out / "report.md").write_text(markdown(summary), encoding="utf-8")
    (options.out / "report.html").write_text(html(summary), encoding="utf-8")
    return summary


def _shown(url: str) -> str:
    """The store as reports show it: a PostgreSQL URL without its credentials."""
    if url.startswith(("postgresql:", "postgres:")):
        from ..store.postgres_url import parse

        return parse(url).where
    return url
