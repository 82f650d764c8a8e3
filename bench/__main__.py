"""``python -m bench``: stead against LangGraph and DBOS, and against the disk's floor.

Every workload runs for stead and for each peer in alternation: within a
round the systems take turns (stead, LangGraph, DBOS; the next round in the
reverse order), so that a slow patch on a shared machine hits all of them, and
every figure quoted is a median over rounds. stead's own extra workloads (the
floor, the memory store, large tool results) run in stead's turn. Resumes take
turns between systems and history sizes. The sandbox's overhead and
hibernation (stead only: the peers have neither) are measured once, after the
warm-up. After W3: the first resume after one long activation (stead only,
:mod:`bench.longrun`) and a step's cost against the conversation's length,
stead and LangGraph (:mod:`bench.curve`). Every workload reports the processor
time per step of the process that ran it beside wall time (:mod:`bench.cpu`).
Then the same comparison runs on PostgreSQL, with the agents-in-flight
workload (:mod:`bench.postgres_peers`; ``--no-postgres`` skips it). The peers
run in ``.venv-peers`` (``make bench`` builds it); ``--systems stead`` runs stead
alone. Prints a table and writes
bench/results/latest.{json,md,png} and curve.png. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import (
    comparison,
    curve,
    floor,
    hibernation,
    longrun,
    machine,
    postgres_peers,
    render_flat,
    report,
    sandbox_overhead,
    steps,
)
from .systems import PEERS, PEERS_PYTHON, Hist, PeerError, Stead, System
from .workload import REPO_ROOT

BENCH_DIR = Path(__file__).resolve().parent


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--systems",
        type=lambda s: [x for x in s.split(",") if x],
        default=["stead", *PEERS],
        help="comma-separated: stead,langgraph,dbos (all)",
    )
    p.add_argument(
        "--peers-python",
        type=Path,
        default=PEERS_PYTHON,
        help="the peers' interpreter (.venv-peers/bin/python)",
    )
    p.add_argument("--rounds", type=int, default=5, help="rounds of W1 and stead's extras (5)")
    p.add_argument("--steps", type=int, default=1000, help="W1: steps of the one agent (1000)")
    p.add_argument(
        "--variant-steps",
        type=int,
        default=500,
        help="W1 at each peer's default durability setting, for information; 0 skips (500)",
    )
    p.add_argument("--w2-rounds", type=int, default=3, help="rounds of W2 (3)")
    p.add_argument("--agents", type=int, default=1000, help="W2: stead's agents (1000)")
    p.add_argument(
        "--peer-agents", type=int, default=200, help="W2: each peer's agents (200; see docs)"
    )
    p.add_argument("--agent-steps", type=int, default=20, help="W2: steps per agent (20)")
    p.add_argument(
        "--sizes",
        type=_ints,
        default=[10, 1_000, 10_000, 100_000],
        help="W3: history lengths in agent steps (10,1000,10000,100000)",
    )
    p.add_argument(
        "--peer-max-history",
        type=int,
        default=10_000,
        help="W3: the peers' longest history, in steps (10000; see docs)",
    )
    p.add_argument("--resume-reps", type=int, default=5, help="W3: resumes per size (5)")
    p.add_argument("--crash-agents", type=int, default=100, help="W5: agents to crash (100)")
    p.add_argument(
        "--large-output",
        type=int,
        default=10_000,
        help="stead only: tool result bytes for the large-output run; 0 skips it (10000)",
    )
    p.add_argument(
        "--large-steps", type=int, default=200, help="stead only: steps per large-output run"
    )
    p.add_argument("--floor-commits", type=int, default=500, help="commits per floor run (500)")
    p.add_argument(
        "--render-steps",
        type=int,
        default=2000,
        help="stead only: steps of the long run with a small window whose renders are "
        "timed; 0 skips it (2000)",
    )
    p.add_argument(
        "--sandbox-runs",
        type=int,
        default=200,
        help="stead only: runs of each trivial command, sandboxed and plain; 0 skips it (200)",
    )
    p.add_argument(
        "--hibernation-agents",
        type=int,
        default=hibernation.AGENTS,
        help="stead only: hibernated agents for disk and worker memory; 0 skips that part "
        f"({hibernation.AGENTS:,})",
    )
    p.add_argument(
        "--no-hibernation", action="store_true", help="stead only: skip the hibernation bench"
    )
    p.add_argument("--no-curve", action="store_true", help="skip the step-cost curve")
    p.add_argument(
        "--curve-sizes",
        type=_ints,
        default=curve.SIZES,
        help="the curve's conversation sizes, tokens (1000,10000,30000,60000,90000)",
    )
    p.add_argument(
        "--curve-results",
        type=_ints,
        default=curve.RESULT_BYTES,
        help="the curve's tool result sizes, bytes (100,2000)",
    )
    p.add_argument(
        "--curve-window", type=int, default=curve.WINDOW, help="steps measured per size (20)"
    )
    p.add_argument("--curve-rounds", type=int, default=1, help="rounds of the curve (1)")
    p.add_argument(
        "--long-steps",
        type=int,
        default=longrun.STEPS,
        help="first resume after ONE activation of this many steps, killed near its end; "
        f"0 skips it ({longrun.STEPS:,})",
    )
    p.add_argument(
        "--long-reps", type=int, default=longrun.REPS, help=f"its resumes ({longrun.REPS})"
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
    p.add_argument("--no-chart", action="store_true", help="do not draw latest.png")
    p.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile one stead steps run and write OUT/profile.txt",
    )
    p.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    postgres_peers.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.w2_rounds, args.resume_reps = 2, 1, 2
        args.steps, args.variant_steps, args.floor_commits, args.large_steps = 200, 100, 100, 50
        args.agents = args.peer_agents = 50
        args.sandbox_runs = min(args.sandbox_runs, 30)
        args.render_steps = min(args.render_steps, 400)
        args.hibernation_agents = min(args.hibernation_agents, 500)
        args.sizes = [10, 1_000]
        args.curve_sizes, args.curve_window = curve.QUICK_SIZES, curve.QUICK_WINDOW
        args.long_steps, args.long_reps = min(args.long_steps, longrun.QUICK_STEPS), 2
        postgres_peers.quick(args)
    unknown = [s for s in args.systems if s != "stead" and s not in PEERS]
    if unknown:
        p.error(f"--systems: unknown {', '.join(unknown)}")
    if "stead" not in args.systems:
        p.error("--systems: stead is always measured (the peers are compared with it)")
    if min(args.sizes) < 1:
        p.error("--sizes: a history has at least one step")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    peers = [s for s in args.systems if s != "stead"]
    if peers and not args.peers_python.exists():
        print(
            f"{args.peers_python} does not exist: `make bench` builds .venv-peers, "
            "or pass --systems stead",
            file=sys.stderr,
        )
        return 2
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
        if not args.no_chart:
            chart(results, args)
            if results.get("curve"):
                chart(results, args, "curve.png")
    pg = results.get("postgres") or {}
    errors = results["compare"]["errors"] + pg.get("errors", [])
    if errors:
        print(f"{len(errors)} measurement(s) failed; see 'errors' in the JSON", file=sys.stderr)
    return 1 if errors else 0


def chart(results: dict[str, Any], args: argparse.Namespace, name: str = "latest.png") -> None:
    """Draw latest.png (or curve.png, the step-cost curve) with matplotlib, which lives in
    the peers' venv."""
    python = args.peers_python if args.peers_python.exists() else Path(sys.executable)
    png = args.out / name
    proc = subprocess.run(
        [str(python), "-m", "bench.chart", str(args.out / "latest.json"), str(png)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode == 0:
        print(f"wrote {png}")
    else:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        print(f"no chart ({python} could not draw it):\n{tail}", file=sys.stderr)


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

    stead = Stead()
    systems: list[System] = [stead]
    systems += [
        PEERS[name](args.peers_python, args.peer_max_history)
        for name in args.systems
        if name != "stead"
    ]
    errors: list[dict[str, str]] = []
    broken: set[str] = set()

    def attempt(system: System, what: str, fn: Callable[[], Any]) -> Any:
        """Run one measurement of a peer; a failure is recorded and the peer skipped after."""
        if system.name in broken:
            return None
        try:
            return fn()
        except PeerError as e:
            say(f"error: {e}")
            errors.append({"system": system.name, "workload": what, "error": str(e)})
            broken.add(system.name)
            return None

    infos: dict[str, Any] = {}
    for s in systems:
        got = attempt(s, "info", lambda s=s: once(s.info))
        if got is not None:
            infos[s.name] = got
            if s.name != "stead":
                say(
                    f"{s.label}: {got['versions']}; SQLite {got['used']} "
                    f"(its default: {got['default']})"
                )

    say("warming up")
    once(lambda d: floor.measure(d, 50))
    once(lambda d: steps.measure(d, 50, "sqlite"))
    once(lambda d: steps.measure(d, 50, "memory"))
    if args.large_output:
        once(lambda d: steps.measure(d, 30, "sqlite", args.large_output))

    # -- stead only, once: render cost early and late in a long, compacted run
    render: dict[str, Any] | None = None
    if args.render_steps:
        render = once(lambda d: render_flat.measure(d, args.render_steps))
        say(
            f"render: {render['render_ms_first']:.3f} ms per step in the first tenth, "
            f"{render['render_ms_last']:.3f} ms in the last ({render['compactions']} compactions); "
            f"a compacting step {render['compacting_step_ms'] or 0:.2f} ms against "
            f"{render['step_ms']:.2f} for the others"
        )

    # -- stead only, once: a command in the sandbox against a plain subprocess
    sandbox: dict[str, Any] | None = None
    if args.sandbox_runs:
        sandbox = once(lambda d: sandbox_overhead.measure(d, args.sandbox_runs))
        if sandbox.get("skipped"):
            say(f"sandbox overhead: not measured ({sandbox['skipped']})")
        else:
            say(
                f"sandbox overhead ({sandbox['sandbox']}): "
                + ", ".join(
                    f"{shlex.join(c['argv'])} {c['sandbox_median_ms']:.1f} ms one-shot, "
                    f"{c['session_median_ms']:.1f} ms in a session "
                    f"vs {c['plain_median_ms']:.1f} ms plain"
                    for c in sandbox["commands"].values()
                )
            )

    # -- stead only, once: hibernating idle agents, waking them, what they cost
    hib: dict[str, Any] | None = None
    if not args.no_hibernation:
        hib = once(
            lambda d: hibernation.measure(
                d,
                reps=hibernation.QUICK_REPS if args.quick else hibernation.REPS,
                agents=args.hibernation_agents,
                say=say,
            )
        )

    histories = build_histories(args, work, systems, attempt)

    # -- W1, with stead's own extra workloads in stead's turn ----------------
    stead_extra: list[tuple[str, Callable[[Path], dict[str, Any]]]] = [
        ("floor", lambda d: floor.measure(d, args.floor_commits)),
        ("memory", lambda d: steps.measure(d, args.steps, "memory")),
        ("http_model", lambda d: steps.measure_http(d, args.steps)),
    ]
    if args.large_output:
        stead_extra.append(
            (
                "sqlite_large",
                lambda d: steps.measure(d, args.large_steps, "sqlite", args.large_output),
            )
        )
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in ("sqlite", *dict(stead_extra))}
    w1: dict[str, list[dict[str, Any]]] = {s.name: [] for s in systems}
    variants: dict[str, list[dict[str, Any]]] = {}
    labels: dict[str, str] = {}
    for r in range(args.rounds):
        order = systems if r % 2 == 0 else systems[::-1]
        for s in order:
            if s is stead:
                extra = stead_extra if r % 2 == 0 else stead_extra[::-1]
                for name, fn in extra:
                    rounds[name].append(once(fn))
                got = once(lambda d: stead.w1(d, args.steps))
                rounds["sqlite"].append(got)
                w1["stead"].append(got)
                continue
            got = attempt(s, "w1", lambda s=s: once(lambda d: s.w1(d, args.steps)))
            if got is not None:
                w1[s.name].append(got)
            if args.variant_steps:
                for key, label in s.w1_variants():
                    vname = f"{s.name}:{key}"
                    labels[vname] = label
                    got = attempt(
                        s,
                        f"w1 {key}",
                        lambda s=s, key=key: once(
                            lambda d: s.w1_variant(key, d, args.variant_steps)
                        ),
                    )
                    if got is not None:
                        variants.setdefault(vname, []).append(got)
        say(
            f"round {r + 1}/{args.rounds}: floor {rounds['floor'][-1]['median_ms']:.3f} ms; W1 "
            + ", ".join(
                f"{s.label} {w1[s.name][-1]['steps_per_s']:.0f}"
                for s in systems
                if len(w1[s.name]) == r + 1
            )
            + " steps/s"
        )

    # -- W2 --------------------------------------------------------------------
    w2: dict[str, list[dict[str, Any]]] = {s.name: [] for s in systems}
    for r in range(args.w2_rounds):
        order = systems if r % 2 == 0 else systems[::-1]
        for s in order:
            agents = args.agents if s is stead else args.peer_agents
            got = attempt(
                s,
                "w2",
                lambda s=s, agents=agents: once(lambda d: s.w2(d, agents, args.agent_steps)),
            )
            if got is not None:
                w2[s.name].append(got)
        say(
            f"W2 round {r + 1}/{args.w2_rounds}: "
            + ", ".join(
                f"{s.label} {w2[s.name][-1]['steps_per_s']:.0f}"
                for s in systems
                if len(w2[s.name]) == r + 1
            )
            + " steps/s"
        )

    # -- W3 --------------------------------------------------------------------
    resumes: dict[str, dict[int, list[dict[str, Any]]]] = {
        name: {size: [] for size in hs} for name, hs in histories.items()
    }
    for rep in range(args.resume_reps):
        order = systems if rep % 2 == 0 else systems[::-1]
        for size in args.sizes:
            for s in order:
                h = histories.get(s.name, {}).get(size)
                if h is None:
                    continue
                got = attempt(s, f"w3 {size}", lambda s=s, h=h: s.resume(h))
                if got is not None:
                    resumes[s.name][size].append(got)
        say(
            f"resume {rep + 1}/{args.resume_reps}: "
            + "; ".join(
                f"{s.label} "
                + ", ".join(
                    f"{n:,} {v[-1]['resume_ms']:.0f} ms"
                    for n, v in resumes.get(s.name, {}).items()
                    if len(v) == rep + 1
                )
                for s in systems
            )
        )

    # -- the first resume after one long activation, beside W3 (stead only) ------
    long = None
    if args.long_steps:
        long = once(lambda d: longrun.measure(d, args.long_steps, args.long_reps))
        say(
            f"after one activation of {args.long_steps:,} steps: first resume "
            f"{long['first']['resume_ms']:.0f} ms, the next {long['second']['resume_ms']:.0f} ms"
        )

    # -- the step cost against the conversation's length ------------------------
    steps_curve = None
    if not args.no_curve:
        names = [s.name for s in systems if s.name in ("stead", "langgraph")]
        names = [n for n in names if n not in broken]
        steps_curve = curve.measure(
            fresh(),
            names,
            args.curve_sizes,
            args.curve_results,
            args.curve_window,
            args.peers_python,
            args.curve_rounds,
        )
        errors.extend(steps_curve["errors"])

    # -- W5 (only where a system has it) ---------------------------------------
    w5: dict[str, Any] = {}
    for s in systems:
        if s.w5 is not None:
            measure_w5 = s.w5
            w5[s.name] = once(lambda d, fn=measure_w5: fn(d, args.crash_agents))

    if args.profile:
        args.out.mkdir(parents=True, exist_ok=True)
        steps.profile(fresh(), args.steps, args.out / "profile.txt")
        say(f"wrote {args.out / 'profile.txt'}")

    pg = None if args.no_postgres else postgres_peers.run(args, work, build_histories)

    info["loadavg_end"] = machine.loadavg()
    stead_hists = [h.handle for h in histories["stead"].values()]
    stead_resumes = {h.handle.events: resumes["stead"][n] for n, h in histories["stead"].items()}
    res = report.summarise(info, vars(args), rounds, stead_hists, stead_resumes)
    res["sandbox"] = sandbox
    res["render"] = render
    res["hibernation"] = hib
    res["compare"] = comparison.summarise(
        systems, infos, w1, variants, labels, w2, histories, resumes, w5, res["floor"], errors
    )
    res["compare"]["long_resume"] = long
    res["curve"] = steps_curve
    res["postgres"] = pg
    return res


def build_histories(
    args: argparse.Namespace,
    work: Path,
    systems: list[System],
    attempt: Callable[[System, str, Callable[[], Any]], Any],
) -> dict[str, dict[int, Hist]]:
    """Build every system's W3 histories; the peers' in their own processes meanwhile.

    Building is not measured, so the peers build in parallel with stead (each
    peer's sizes one after another) to save time on a 2-core machine.
    """
    say = report.progress
    out: dict[str, dict[int, Hist]] = {s.name: {} for s in systems}

    def build_all(s: System) -> None:
        for size in args.sizes:
            if s.max_history is not None and size > s.max_history:
                say(f"{s.label}: no history of {size:,} steps (--peer-max-history)")
                continue
            d = work / f"history-{s.name}-{size}"
            d.mkdir()
            h = attempt(s, f"w3 build {size}", lambda s=s, d=d, size=size: s.build_history(d, size))
            if h is None:
                return
            out[s.name][size] = h
            say(
                f"{s.label}: built a history of {size:,} steps in {h.build_s:.1f}s "
                f"({h.db_bytes:,} bytes)"
            )

    peers = [s for s in systems if s.name != "stead"]
    with ThreadPoolExecutor(max_workers=max(1, len(peers))) as pool:
        futures = [pool.submit(build_all, s) for s in peers]
        build_all(systems[0])
        for f in futures:
            f.result()
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
