"""``stead work``: run every runnable agent in the store."""

from __future__ import annotations

import argparse
import signal
import time
from types import FrameType
from typing import TYPE_CHECKING

from rich.table import Table

from ..errors import StoreUnusable
from ..extras import need
from ..notify import Deliverer, hooks
from ..runtime.runtime import Runtime
from ..workers.threaded import Worker, WorkerReport
from .common import (
    EXIT_COMPLETED,
    EXIT_FAILED,
    emit_json,
    err,
    out,
    positive_seconds,
    runtime_for,
    seconds,
    tenant_of,
    wants_json,
    whole,
)
from .worklog import FORMATS, WorkLog

if TYPE_CHECKING:
    from ..workers.parked import ParkedWorker


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "work", parents=[common], help="run every runnable agent, many at a time, with group commit"
    )
    p.add_argument(
        "--concurrency",
        type=whole(1, 4096),
        default=32,
        help="agents run at once (default 32); with --in-flight, the threads they run on",
    )
    p.add_argument(
        "--in-flight",
        type=whole(1, 1_000_000),
        default=None,
        metavar="N",
        help="keep up to N agents in flight, each parked while its model answers, on "
        "--concurrency threads (for models over HTTP that take seconds: thousands of "
        "agents per worker; see docs/scaling.md)",
    )
    p.add_argument(
        "--forever",
        action="store_true",
        help="keep looking for work until stopped (SIGTERM or Ctrl-C)",
    )
    p.add_argument(
        "--poll",
        type=positive_seconds,
        default=1.0,
        metavar="SECONDS",
        help="with --forever, how often to look for work (default 1); a PostgreSQL "
        "store tells its workers of new work at once, so they can look seldom",
    )
    p.add_argument(
        "--hibernate-after",
        type=seconds,
        default=300.0,
        metavar="SECONDS",
        help="hibernate agents that have waited this long (default 300)",
    )
    p.add_argument("--no-hibernate", action="store_true", help="never hibernate idle agents")
    p.add_argument(
        "--lease-ttl",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="how long an agent's lease lasts unrenewed (default 30): how soon other "
        "workers take over the agents of one that stopped",
    )
    p.add_argument(
        "--log-format",
        choices=FORMATS,
        default=None,
        help="log each activation's start and end on stderr: text for people, json for one "
        "object a line (default: text with --forever, no log without it)",
    )
    p.set_defaults(func=cmd_work)


def cmd_work(args: argparse.Namespace) -> int:
    while True:
        try:
            with runtime_for(args) as rt:
                return _work(args, rt)
        except StoreUnusable as exc:
            if not args.forever:
                raise
            # started while the store is down (a restart, a deploy before the database):
            # a worker meant to run for good waits for it, as it does once running
            err.print(f"the store cannot be used yet ({exc}); trying again", markup=False)
            time.sleep(min(args.poll, 1.0))


def _work(args: argparse.Namespace, rt: Runtime) -> int:
    if args.lease_ttl is not None:
        rt.lease_ttl = args.lease_ttl
    hibernate_after = None if args.no_hibernate else args.hibernate_after
    worker = (
        Worker(rt, args.concurrency, tenant_of(args), hibernate_after=hibernate_after)
        if args.in_flight is None
        else _parked()(
            rt,
            args.in_flight,
            threads=args.concurrency,
            tenant=tenant_of(args),
            hibernate_after=hibernate_after,
        )
    )

    form = args.log_format or ("text" if args.forever else None)
    if form is not None:
        WorkLog(rt, form).attach(worker)

    def stop(signum: int, frame: FrameType | None) -> None:
        err.print("stopping: no new agents will start; running ones end their step")
        worker.stop()

    previous = signal.signal(signal.SIGTERM, stop)
    total = WorkerReport()
    deliverer = Deliverer(hooks.rows_of(rt.store), rt.clock)  # webhooks, after each pass
    try:
        while True:
            try:
                report = worker.run_until_idle()
                _merge(total, report)
                deliverer.deliver_due()
                if not args.forever or worker.stopping:
                    break
                worker.wait_for_work(args.poll)  # told of work at once where the store can
            except StoreUnusable as exc:
                if not args.forever:
                    raise
                # a restart or a cut link: what was committed stays, what was not is
                # redone by whoever holds the agent next; look again soon
                err.print(f"the store cannot be used now ({exc}); trying again", markup=False)
                time.sleep(min(args.poll, 1.0))
    except KeyboardInterrupt:
        worker.stop()
    finally:
        signal.signal(signal.SIGTERM, previous)
        deliverer.close()
    if wants_json(args):
        emit_json(
            {
                "ran": total.ran,
                "busy": total.busy,
                "errors": total.errors,
                "hibernated": total.hibernated,
                "steps": total.steps,
                "commits": total.commits,
                "batches": total.batches,
                "schedules": {
                    "delivered": len(worker.fired.delivered),
                    "skipped": len(worker.fired.skipped),
                    "failed": len(worker.fired.failed),
                    "missed": worker.fired.missed,
                    "errors": worker.fired.errors,
                },
            }
        )
    else:
        table = Table("agent", "status", box=None)
        for agent_id, status in sorted(total.ran.items()):
            table.add_row(agent_id, status)
        for agent_id in total.busy:
            table.add_row(agent_id, "[yellow]held by another worker[/]")
        for agent_id, message in total.errors.items():
            table.add_row(agent_id, f"[red]error[/]: {message}")
        for agent_id in total.hibernated:
            table.add_row(agent_id, "[magenta]hibernated[/] (idle)")
        out.print(table)
        out.print(
            f"{len(total.ran)} agents, {total.steps} steps, {total.batches} batches in "
            f"{total.commits} commits"
        )
        fired = worker.fired
        if fired.delivered or fired.skipped or fired.failed or fired.missed:
            out.print(f"schedules: {len(fired.delivered)} fired, {len(fired.skipped)} skipped, "
                      f"{len(fired.failed)} failed, {fired.missed} missed")  # fmt: skip
        for schedule_id, problem in fired.errors.items():
            err.print(f"schedule {schedule_id}: {problem}", markup=False)
    return EXIT_FAILED if total.errors else EXIT_COMPLETED


def _parked() -> type[ParkedWorker]:
    need("aiohttp", "inflight", "stead work --in-flight")
    from ..workers.parked import ParkedWorker  # only a worker asked for it imports aiohttp

    return ParkedWorker


def _merge(total: WorkerReport, report: WorkerReport) -> None:
    total.ran.update(report.ran)
    total.busy = sorted(set(total.busy) | set(report.busy))
    total.errors.update(report.errors)
    total.hibernated = sorted(set(total.hibernated) | set(report.hibernated))
    total.steps += report.steps
    total.commits += report.commits
    total.batches += report.batches
