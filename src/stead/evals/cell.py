"""One cell of an eval: one task, under one condition, once.

The cell creates the agent in its own folder (and its own SQLite store, unless
the eval runs on a shared store URL), runs it in worker processes
(:mod:`stead.evals.worker`) until it ends, injects the condition's boundary at
its point, answers approvals as the task's person would, and measures the
journal. Its record is written last and atomically (``cell.json``): a cell
without one did not finish and is run again when the eval is.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import SystemClock
from ..errors import SteadError
from ..ids import new_id
from ..integrity.certificates import journaled_certificate, verify_certificate
from ..journal import Event
from ..runtime.runtime import Runtime
from ..snapshots.hibernation import HIBERNATABLE
from . import conditions
from .measure import measure
from .processes import WorkerRun, run_worker
from .suite import MID_STEP, Condition, Task

FORMAT = "stead-eval-cell/1"
MAX_ROUNDS = 200
"""Worker runs and approval rounds a cell may take before it is called stuck."""


@dataclass(frozen=True)
class CellPlan:
    task: Task
    condition: Condition
    run: int
    at: int | None
    """The decision the boundary falls at (None for the baseline)."""
    folder: Path
    key: str
    """The eval's vault key (base64), so completions are certified."""
    store: str | None = None
    """A shared store URL; None gives the cell a SQLite store of its own."""
    timeout: float = 600.0
    """Seconds one worker may run before it is killed and the cell fails."""
    budget_usd: float | None = None
    budget_tokens: float | None = None
    restart: str | None = None
    """db_restart: the command that restarts the database server (the operator's,
    from the command line); None drops the worker's connections instead."""


class _Cell:
    def __init__(self, plan: CellPlan) -> None:
        self.plan = plan
        self.url = plan.store or f"sqlite:///{plan.folder / 'stead.db'}"
        self.key = base64.b64decode(plan.key)
        self.rt = Runtime(self.url, plan.folder / "data", secret_key=self.key)
        self.agent_id = new_id("ag", SystemClock())
        self.moved_to: Runtime | None = None
        self.source_events: list[Event] = []
        self.injected: dict[str, Any] | None = None
        self.workers: list[WorkerRun] = []
        self.never_waited = False
        folder = str(plan.folder)
        env = {k: v for k, v in os.environ.items() if k != "STEAD_SECRET_KEY_FILE"}
        env.update({k: v.replace("{cell}", folder) for k, v in plan.task.env.items()})
        env["STEAD_SECRET_KEY"] = plan.key
        self.env = env
        self.app = f"stead-eval-{self.agent_id}"
        # the workers' PostgreSQL connections carry the cell's name: db_restart finds them by it
        self.worker_url = self.url
        if self.url.startswith(("postgresql:", "postgres:")):
            self.worker_url += ("&" if "?" in self.url else "?") + f"application_name={self.app}"

    def close(self) -> None:
        self.rt.close()
        if self.moved_to is not None:
            self.moved_to.close()

    # -- running -----------------------------------------------------------

    def worker(self, **options: int | float | None) -> WorkerRun:
        rt = self.moved_to or self.rt
        url = self.worker_url if self.moved_to is None else self._moved_url
        args = ["--store", url, "--data-dir", str(rt.data_dir), "--agent", self.agent_id]
        if self.injected is not None:  # one boundary per cell
            options.pop("hold_after_intent", None)
        for name, value in options.items():
            if value is not None:
                args += [f"--{name.replace('_', '-')}", str(value)]
        log = self.plan.folder / f"worker-{len(self.workers) + 1}.log"
        run = run_worker(args, self.env, log, self.plan.timeout, self._held)
        self.workers.append(run)
        return run

    def _held(self, held: dict[str, Any], kill: Callable[[], None], go: Callable[[], None]) -> bool:
        kind = self.plan.condition.kind
        if kind == "kill":
            kill()
            self.injected = {
                "kind": kind,
                "at": held.get("decision"),
                "held": held,
                "detail": f"worker SIGKILLed after the intent of {held.get('call_id')} "
                f"({held.get('tool')}) was journaled",
            }
            return True
        during = f"while {held.get('call_id')} ({held.get('tool')}) ran"
        if self.plan.restart is not None:
            took = conditions.restart_server(self.url, self.plan.restart)
            detail = f"the database server restarted ({took:.1f} s) {during}"
        else:
            dropped = conditions.drop_connections(self.url, self.app)
            detail = f"{dropped} database connections of the worker terminated {during}"
        self.injected = {"kind": kind, "at": held.get("decision"), "held": held, "detail": detail}
        go()
        return False

    def answer_approvals(self) -> int:
        rt = self.moved_to or self.rt
        answered = 0
        for _, approval in rt.pending_approvals(agent_id=self.agent_id):
            tool = str(approval.get("tool", ""))
            if self.plan.task.approves(tool):
                rt.approve(approval["approval_id"])
            else:
                rt.deny(approval["approval_id"], f"the eval's person does not approve {tool}")
            answered += 1
        resolution = self.plan.task.resolve
        if resolution != "none":
            for call_id in sorted(rt.store.load_state(self.agent_id).unknown):
                rt.resolve(self.agent_id, call_id, resolution)
                answered += 1
        return answered

    def inject_between(self) -> None:
        plan, rt, kind = self.plan, self.rt, self.plan.condition.kind
        detail = ""
        if kind == "hibernate":
            snap = rt.hibernate(self.agent_id, reason="the eval's hibernate condition")
            rt.wake(self.agent_id)
            detail = f"hibernated into snapshot {snap.snapshot_id}, then woken"
        elif kind == "move":
            archive = plan.folder / "moved.archive"
            rt.export(self.agent_id, archive, move=True)
            self._moved_url = f"sqlite:///{plan.folder / 'moved.db'}"
            self.moved_to = Runtime(self._moved_url, plan.folder / "moved", secret_key=self.key)
            self.source_events = list(rt.store.read_events(self.agent_id))
            state = self.moved_to.import_archive(archive, with_grants=True)
            detail = f"moved to a second store as {state.agent_id}"
            self.agent_id = state.agent_id
        elif kind == "model_swap":
            to = plan.condition.to or conditions.own_model(plan.task.spec)
            rt.set_model(self.agent_id, to, base_dir=Path(plan.task.spec.base_dir or "."))
            detail = f"model set to {to if isinstance(to, str) else to.get('model', to)}"
        elif kind == "compact":
            own = conditions.own_model(plan.task.spec)
            rt.set_model(self.agent_id, conditions.squeezed(own))
            self._run_to_end(max_steps=1)  # the next decision is asked after a compaction
            rt.set_model(self.agent_id, own)
            detail = "compaction forced before the next decision, then the model's own budget"
        elif kind == "grant_lapse":
            lapsed = conditions.lapse_grants(rt, self.agent_id, plan.condition.tool)
            if not lapsed:
                covering = plan.condition.tool or "any tool"
                raise SteadError(
                    f"grant_lapse: the agent holds no grant covering {covering} at its "
                    "boundary; name a tool it is granted (`tool:`)"
                )
            detail = f"grants {', '.join(lapsed)} lapsed"
        now = (self.moved_to or rt).store.load_state(self.agent_id)
        self.injected = {"kind": kind, "at": now.decisions, "detail": detail}

    def _run_to_end(self, stop_at_wait: bool = False, **options: int | float | None) -> str | None:
        """Run workers (answering approvals between them) until the agent stops for
        good, or ``options`` stop it, or (``stop_at_wait``) it waits for the world;
        why it could not go on, if it cannot."""
        for _ in range(MAX_ROUNDS):
            rt = self.moved_to or self.rt
            state = rt.store.load_state(self.agent_id)
            if state.is_final or (stop_at_wait and state.status in HIBERNATABLE):
                return None
            if self.answer_approvals():
                continue
            if state.status in HIBERNATABLE and self.workers:
                return f"the agent stopped {state.status}: {state.status_reason}"
            run = self.worker(**options, **self._budget())
            failed = run.failure()
            if failed and not (self.plan.condition.kind == "db_restart" and self.injected):
                return failed
            if run.last.get("over_budget"):
                return "stopped by the eval's budget"
            if "max_steps" in options or run.killed:
                return None
        return f"no end after {MAX_ROUNDS} worker runs"

    def _budget(self) -> dict[str, float | None]:
        return {"budget_usd": self.plan.budget_usd, "budget_tokens": self.plan.budget_tokens}

    def drive(self) -> str | None:
        """The whole run, with the boundary; why it stopped early, if it did."""
        kind, at = self.plan.condition.kind, self.plan.at
        if kind in MID_STEP and at is not None:
            for _ in range(MAX_ROUNDS):
                if (
                    self.injected
                    or (self.moved_to or self.rt).store.load_state(self.agent_id).is_final
                ):
                    break
                if self.answer_approvals():
                    continue
                why = self._run_to_end(hold_after_intent=at, max_steps=None)
                if why is not None:
                    return why
        elif kind != "baseline" and at is not None:
            while not self.injected:
                state = self.rt.store.load_state(self.agent_id)
                if state.is_final:
                    break
                if state.decisions >= at:
                    if kind == "hibernate" and state.status not in HIBERNATABLE:
                        # only an agent waiting for the world is hibernated: its next wait
                        why = self._run_to_end(stop_at_wait=True)
                        if why is not None:
                            return why
                        state = self.rt.store.load_state(self.agent_id)
                        if state.status not in HIBERNATABLE:
                            self.never_waited = True
                            break
                    self.inject_between()
                    break
                why = self._run_to_end(max_steps=at - state.decisions)
                if why is not None:
                    return why
        return self._run_to_end()


def run_cell(plan: CellPlan) -> dict[str, Any]:
    """Run one cell, write its ``cell.json``, and return the record."""
    plan.folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    task, condition = plan.task, plan.condition
    record: dict[str, Any] = {
        "format": FORMAT,
        "task": task.id,
        "condition": condition.label,
        "kind": condition.kind,
        "run": plan.run,
        "at": plan.at,
        "agent_id": None,
        "injected": None,
        "not_applicable": None,
        "error": None,
        "wall_seconds": 0.0,
        "cpu_seconds": 0.0,
        "workers": 0,
        "stopped": None,
        "metrics": None,
    }
    url = plan.store or f"sqlite:///{plan.folder / 'stead.db'}"
    na = conditions.not_applicable(condition, task.spec, url)
    if na is not None:
        record["not_applicable"] = na
        return _write(plan, record)
    cell = _Cell(plan)
    record["agent_id"] = cell.agent_id
    try:
        cell.rt.check_loads(task.spec)
        state = cell.rt.create(task.spec, cell.agent_id)
        if task.message:
            cell.rt.send(cell.agent_id, task.message)
        before = conditions.files_of(cell.rt.workspace(cell.agent_id, state.tenant).root)
        record["stopped"] = cell.drive()
        if condition.kind != "baseline" and cell.injected is None:
            final = (cell.moved_to or cell.rt).store.load_state(cell.agent_id)
            record["error"] = (
                f"the {condition.kind} boundary was not injected: only an agent waiting for "
                f"the world (an approval, input, a timer) is hibernated, and this one did not "
                f"wait after decision {plan.at}; give the task a wait (an approval) after it"
                if cell.never_waited
                else f"the {condition.kind} boundary was not injected: the run ended after "
                f"{final.decisions} decisions, before its point (decision {plan.at})"
            )
        record["metrics"], events, moved = _measure(cell, before)
        if cell.injected is not None:
            cell.injected["proof"] = conditions.proof(condition.kind, events, moved, cell.injected)
        record["injected"] = cell.injected
        record["agent_id"] = cell.agent_id
    except SteadError as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # one cell's fault is its record's, not the whole eval's end
        record["error"] = f"the eval failed in this cell: {type(exc).__name__}: {exc}"
    finally:
        cell.close()
        record["workers"] = len(cell.workers)
        record["cpu_seconds"] = round(sum(w.cpu_seconds for w in cell.workers), 3)
        record["wall_seconds"] = round(time.monotonic() - started, 3)
    return _write(plan, record)


def _measure(
    cell: _Cell, before: dict[str, str]
) -> tuple[dict[str, Any], list[Event], list[Event]]:
    rt = cell.moved_to or cell.rt
    state = rt.store.load_state(cell.agent_id)
    own = list(rt.store.read_events(cell.agent_id))
    events = [*cell.source_events, *own] if cell.moved_to else own
    try:
        problems: list[str] | None = verify_certificate(
            rt.store, journaled_certificate(rt.store, cell.agent_id)
        )
    except SteadError:
        problems = None  # no certificate: the run did not complete, or was not certified
    after = conditions.files_of(rt.workspace(cell.agent_id, state.tenant).root)
    metrics = measure(
        events,
        state,
        expect=cell.plan.task.expect.to_json(),
        certificate_problems=problems,
        files_before=before,
        files_after=after,
    )
    source = cell.source_events if cell.moved_to else own
    return metrics, source, own if cell.moved_to else []


def _write(plan: CellPlan, record: dict[str, Any]) -> dict[str, Any]:
    # whole or absent: a resumed eval trusts every cell.json it finds
    part = plan.folder / "cell.json.part"
    part.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(part, plan.folder / "cell.json")
    return record
