"""``python -m bench``: run every workload, print medians, write bench/results/latest.*.

Workloads alternate round by round (floor, steps on SQLite, steps on the memory
store, steps with large tool results) so that a slow patch on a shared machine
hits all of them, and every figure quoted is a median over rounds. Resume runs
take turns between history sizes. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import floor, machine, report, resume, steps

BENCH_DIR = Path(__file__).resolve().parent


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--rounds", type=int, default=7, help="rounds of floor and steps (7)")
    p.add_argument("--steps", type=int, default=500, help="decisions per steps run (500)")
    p.add_argument(
        "--large-output",
        type=int,
        default=10_000,
        help="tool result size in bytes for the large-output steps run; 0 skips it (10000)",
    )
    p.add_argument(
        "--large-steps", type=int, default=200, help="decisions per large-output run (200)"
    )
    p.add_argument("--floor-commits", type=int, default=500, help="commits per floor run (500)")
    p.add_argument("--resume-reps", type=int, default=11, help="resumes per history size (11)")
    p.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[10, 1_000, 10_000, 100_000],
        help="history lengths in events, comma-separated (10,1000,10000,100000)",
    )
    p.add_argument("--quick", action="store_true", help="a fast smoke run (numbers are rough)")
    p.add_argument(
        "--workdir",
        type=Path,
        default=BENCH_DIR,
        help="where the databases go; the disk under it is what is measured (bench/)",
    )
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results", help="bench/results")
    p.add_argument("--no-write", action="store_true", help="print only; write no results")
    p.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile one steps run and write OUT/profile.txt",
    )
    p.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.floor_commits, args.resume_reps = 2, 100, 100, 2
        args.large_steps = 50
        args.sizes = [10, 1_000, 10_000]
    if min(args.sizes) < 2:
        p.error("--sizes: a history has at least 2 events")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".work-", dir=args.workdir))
    try:
        results = run(args, work)
    finally:
        if args.keep:
            print(f"databases kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    results["duration_s"] = time.perf_counter() - started
    report.show(results)
    if not args.no_write:
        for path in report.write(results, args.out):
            print(f"wrote {path}")
    return 0


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    info = machine.describe(work)
    say = report.progress
    say(f"{info['cpu']}, {info['cores']} cores; databases on {info['filesystem']}")
    if info["filesystem"].startswith("tmpfs"):
        say("warning: the databases are on tmpfs, where fsync costs nothing; use --workdir")

    counter = iter(range(1_000_000))

    def fresh() -> Path:
        d = work / f"run-{next(counter)}"
        d.mkdir()
        return d

    def once(fn: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        d = fresh()
        try:
            return fn(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    say("warming up")
    once(lambda d: floor.measure(d, 50))
    once(lambda d: steps.measure(d, 50, "sqlite"))
    once(lambda d: steps.measure(d, 50, "memory"))
    if args.large_output:
        once(lambda d: steps.measure(d, 30, "sqlite", args.large_output))

    histories = []
    for size in args.sizes:
        h = resume.build(work / f"history-{size}", size)
        say(f"built a history of {size:,} events in {h.build_s:.1f}s ({h.db_bytes:,} bytes)")
        histories.append(h)

    workloads: list[tuple[str, Callable[[Path], dict[str, Any]]]] = [
        ("floor", lambda d: floor.measure(d, args.floor_commits)),
        ("sqlite", lambda d: steps.measure(d, args.steps, "sqlite")),
        ("memory", lambda d: steps.measure(d, args.steps, "memory")),
    ]
    if args.large_output:
        workloads.append(
            (
                "sqlite_large",
                lambda d: steps.measure(d, args.large_steps, "sqlite", args.large_output),
            )
        )
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in workloads}
    for r in range(args.rounds):
        order = workloads if r % 2 == 0 else workloads[::-1]
        for name, fn in order:
            rounds[name].append(once(fn))
        f, s, m = (rounds[name][-1] for name in ("floor", "sqlite", "memory"))
        line = (
            f"round {r + 1}/{args.rounds}: floor {f['median_ms']:.3f} ms/commit; "
            f"SQLite {s['steps_per_s']:.0f} steps/s; memory store {m['steps_per_s']:.0f} steps/s"
        )
        if args.large_output:
            large = rounds["sqlite_large"][-1]["steps_per_s"]
            line += f"; {args.large_output:,} B results {large:.0f} steps/s"
        say(line)

    resumes: dict[int, list[dict[str, Any]]] = {h.events: [] for h in histories}
    for rep in range(args.resume_reps):
        for h in histories:
            resumes[h.events].append(resume.resume_once(h))
        say(
            f"resume {rep + 1}/{args.resume_reps}: "
            + ", ".join(f"{n:,} events {v[-1]['resume_ms']:.1f} ms" for n, v in resumes.items())
        )

    if args.profile:
        args.out.mkdir(parents=True, exist_ok=True)
        d = fresh()
        steps.profile(d, args.steps, args.out / "profile.txt")
        say(f"wrote {args.out / 'profile.txt'}")

    info["loadavg_end"] = machine.loadavg()
    return report.summarise(info, vars(args), rounds, histories, resumes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
