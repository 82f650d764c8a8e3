"""A step's cost against the conversation's length: stead and LangGraph, one agent each.

One agent whose model is ``provider: openai`` against :mod:`bench.fake_model`
(zero latency, in a process of its own, so answering is not counted) makes
steps of the bench agent (a ``lookup`` whose result is ``output_bytes`` long,
and a ``remember``); its window is 1,000,000 tokens, so nothing is compacted
and every request carries the whole conversation. For each target size the
conversation is first grown, untimed, to about that many tokens less half of
what the measured window of steps will add; then ``window`` steps (fewer where
they would more than grow a short conversation by half: at least 5) run in one
activation (with one more step before and after them, not counted: the
activation's start and end), each timed from the commit that ends the step
before it to the commit that ends it: wall time, and this process's processor
time over the same span (every thread; the model's process is not counted).
The point's figures are the medians over the window. Its size is the median
request's JSON bytes / 4, read back from the fake model (``GET /stats``).

The LangGraph side (:mod:`bench.peers.langgraph_curve`) is the same agent as a
graph over a message list, run in ``.venv-peers`` against the same fake model.

``python -m bench.curve`` runs the curve alone and prints its table; ``python
-m bench`` runs it after W3 (``--no-curve`` skips it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stead import Event, Kind, Runtime

from . import workload
from .fake_model import FakeModelServer
from .peers.common import window_at
from .stats import median

SIZES = [1_000, 10_000, 30_000, 60_000, 90_000]
QUICK_SIZES = [1_000, 5_000]
RESULT_BYTES = [100, 2_000]
WINDOW = 20
QUICK_WINDOW = 6
CONTEXT_WINDOW = 1_000_000
"""The model's window in tokens: far above the largest size, so nothing is compacted."""


def request_bytes(model_url: str) -> list[int]:
    """The sizes of the requests the fake model has had since it was last asked."""
    base = model_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{base}/stats", timeout=30) as answer:
        sizes: list[int] = json.loads(answer.read())["request_bytes"]
    return sizes


def point(
    target: int, sizes: Sequence[int], wall_ms: Sequence[float], cpu_ms: Sequence[float]
) -> dict[str, Any]:
    """One measured size: medians over the window's steps."""
    return {
        "target_tokens": target,
        "tokens": median(sizes) / 4,
        "tokens_range": [min(sizes) / 4, max(sizes) / 4],
        "steps": len(wall_ms),
        "wall_ms_per_step": median(wall_ms),
        "cpu_ms_per_step": median(cpu_ms),
        "wall_ms": list(wall_ms),
        "cpu_ms": list(cpu_ms),
    }


def grow(
    run: Callable[[int], None],
    sizes: Callable[[], list[int]],
    target: float,
    last: float,
    per_step: float,
) -> tuple[float, float]:
    """Run steps (untimed) until the last request reaches ``target`` tokens.

    ``last`` is the last request's size and ``per_step`` the tokens a step adds
    (estimates; refined as steps run). Returns both, updated.
    """
    while last < target:
        k = max(1, int((target - last) / per_step))
        run(k)
        got = sizes()
        if len(got) >= 2:
            per_step = max(1.0, (got[-1] - got[0]) / 4 / (len(got) - 1))
        last = got[-1] / 4
    return last, per_step


def stead(
    workdir: Path, model_url: str, targets: Sequence[int], output_bytes: int, window: int
) -> dict[str, Any]:
    """stead's curve: one agent on SQLite, measured at each of ``targets`` tokens."""
    rt = Runtime(f"sqlite:///{workdir / 'curve.db'}", data_dir=workdir / "data")
    try:
        provider = {
            "provider": "openai",
            "name": "bench",
            "base_url": model_url,
            "context_window": CONTEXT_WINDOW,
        }
        agent_id = rt.create(workload.spec(workdir, model=provider)).agent_id
        tools = workload.tools(output_bytes)

        def run(steps: int, on_commit: Callable[[Sequence[Event]], None] | None = None) -> None:
            outcome = rt.run(agent_id, tools=tools, max_steps=steps, on_commit=on_commit)
            if outcome.steps != steps:
                raise RuntimeError(
                    f"the curve's agent made {outcome.steps} of {steps} steps "
                    f"(status {outcome.state.status}: {outcome.state.status_reason})"
                )

        run(2)
        got = request_bytes(model_url)
        last, per_step = got[-1] / 4, max(1.0, (got[-1] - got[0]) / 4)
        points = []
        for target in targets:
            n = window_at(target, per_step, window)
            last, per_step = grow(
                run, lambda: request_bytes(model_url), target - per_step * n / 2, last, per_step
            )
            marks: list[tuple[float, float]] = []

            def on_commit(
                events: Sequence[Event], marks: list[tuple[float, float]] = marks
            ) -> None:
                if not marks or any(e.kind == Kind.STEP_COMPLETED for e in events):
                    marks.append((time.perf_counter(), time.process_time()))

            # one step more on each side: the activation's start (the model's client is
            # made) and its end are not a step's steady cost
            run(n + 2, on_commit)
            sizes = request_bytes(model_url)[1:-1]
            last = sizes[-1] / 4
            if len(marks) != n + 3:
                raise RuntimeError(f"expected {n + 2} step-ending commits, saw {len(marks) - 1}")
            wall = [(b[0] - a[0]) * 1e3 for a, b in itertools.pairwise(marks)][1:-1]
            cpu = [(b[1] - a[1]) * 1e3 for a, b in itertools.pairwise(marks)][1:-1]
            points.append(point(target, sizes, wall, cpu))
            report(
                f"curve, stead, {output_bytes:,} B results: {points[-1]['tokens']:,.0f} tokens, "
                f"CPU {points[-1]['cpu_ms_per_step']:.2f} ms/step, "
                f"wall {points[-1]['wall_ms_per_step']:.2f} ms/step"
            )
        compactions = sum(
            1 for _ in rt.store.read_events_of_kinds(agent_id, [str(Kind.CONTEXT_COMPACTED)])
        )
        if compactions:
            raise RuntimeError(f"the curve's conversation was compacted {compactions} times")
    finally:
        rt.close()
    return {"output_bytes": output_bytes, "points": points}


def langgraph(
    python: Path,
    workdir: Path,
    model_url: str,
    targets: Sequence[int],
    output_bytes: int,
    window: int,
) -> dict[str, Any]:
    """LangGraph's curve, in a fresh ``.venv-peers`` process (see
    :mod:`bench.peers.langgraph_curve`)."""
    from .systems import run_peer

    argv = [str(python), "-m", "bench.peers.langgraph_curve", "--dir", str(workdir),
            "--model-url", model_url, "--sizes", ",".join(map(str, targets)),
            "--output-bytes", str(output_bytes), "--window", str(window)]  # fmt: skip
    return run_peer(argv, "langgraph curve")


def report(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def measure(
    work: Path,
    systems: Sequence[str],
    targets: Sequence[int],
    result_bytes: Sequence[int],
    window: int,
    peers_python: Path,
    rounds: int = 1,
) -> dict[str, Any]:
    """Every system's curve at every result size, systems taking turns; each run in a
    fresh directory. Returns ``{"sizes", "window", "curves": {system: {bytes: run}},
    "errors"}``, with a point's figures the medians over rounds."""
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {s: {} for s in systems}
    errors: list[dict[str, str]] = []
    counter = iter(range(1_000_000))
    with FakeModelServer() as url:
        for r in range(rounds):
            for size in result_bytes:
                order = list(systems) if r % 2 == 0 else list(systems)[::-1]
                for system in order:
                    d = work / f"curve-{next(counter)}"
                    d.mkdir(parents=True)
                    request_bytes(url)  # forget whatever the last run sent
                    try:
                        if system == "stead":
                            got = stead(d, url, targets, size, window)
                        else:
                            got = langgraph(peers_python, d, url, targets, size, window)
                    except Exception as e:  # a failed curve is reported, the rest measured
                        report(f"error: curve, {system}, {size} B results: {e}")
                        errors.append(
                            {"system": system, "workload": f"curve {size} B", "error": str(e)}
                        )
                        continue
                    finally:
                        shutil.rmtree(d, ignore_errors=True)
                    runs[system].setdefault(size, []).append(got)
    curves: dict[str, dict[str, Any]] = {}
    for system, by_size in runs.items():
        for size, rs in by_size.items():
            pts: list[dict[str, Any]] = []
            for i, target in enumerate(targets):
                at = [r["points"][i] for r in rs if len(r["points"]) > i]
                pts.append(
                    {
                        "target_tokens": target,
                        "tokens": median(p["tokens"] for p in at),
                        "wall_ms_per_step": median(p["wall_ms_per_step"] for p in at),
                        "cpu_ms_per_step": median(p["cpu_ms_per_step"] for p in at),
                        "rounds": at,
                    }
                )
            first, last = pts[0], pts[-1]
            curves.setdefault(system, {})[str(size)] = {
                "points": pts,
                "cpu_last_over_first": last["cpu_ms_per_step"] / first["cpu_ms_per_step"],
            }
    return {
        "sizes": list(targets),
        "result_bytes": list(result_bytes),
        "window": window,
        "rounds": rounds,
        "curves": curves,
        "errors": errors,
    }


# -- the table ---------------------------------------------------------------------

LABELS = {"stead": "stead", "langgraph": "LangGraph"}
HEADERS = [
    "Tool results",
    "System",
    "~tokens (target)",
    "CPU ms/step",
    "wall ms/step",
    "CPU vs the first size",
]


def rows(curve: dict[str, Any]) -> list[list[str]]:
    out = []
    for size in curve["result_bytes"]:
        for system, by_size in curve["curves"].items():
            c = by_size.get(str(size))
            if c is None:
                continue
            first = c["points"][0]["cpu_ms_per_step"]
            for p in c["points"]:
                out.append(
                    [
                        f"{size:,} B",
                        LABELS.get(system, system),
                        f"{p['tokens']:,.0f} ({p['target_tokens']:,})",
                        f"{p['cpu_ms_per_step']:.2f}",
                        f"{p['wall_ms_per_step']:.2f}",
                        f"{p['cpu_ms_per_step'] / first:.2f}x",
                    ]
                )
    return out


def markdown(curve: dict[str, Any] | None) -> list[str]:
    if not curve:
        return []
    lines = [
        "",
        "### A step's cost against the conversation's length (provider model, SQLite)",
        "",
        "One agent, `provider: openai` against the local zero-latency fake model, window "
        f"{CONTEXT_WINDOW:,} tokens (nothing compacted); medians over up to "
        f"{curve['window']} steps at each size (fewer at a short size, so that they do not "
        f"grow it by more than half), {curve['rounds']} round(s); tokens = the request's "
        "JSON bytes / 4. "
        "CPU is the agent's process's processor time per step.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows(curve)]
    return lines


def main(argv: list[str]) -> int:
    from .systems import PEERS_PYTHON

    p = argparse.ArgumentParser(prog="python -m bench.curve", description=__doc__)
    p.add_argument("--systems", type=lambda s: s.split(","), default=["stead", "langgraph"])
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=SIZES)
    p.add_argument(
        "--result-bytes", type=lambda s: [int(x) for x in s.split(",")], default=RESULT_BYTES
    )
    p.add_argument("--window", type=int, default=WINDOW, help=f"steps measured per size ({WINDOW})")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--peers-python", type=Path, default=PEERS_PYTHON)
    p.add_argument("--json", action="store_true", help="print the JSON as well")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent, prefix=".curve-") as tmp:
        got = measure(
            Path(tmp),
            args.systems,
            args.sizes,
            args.result_bytes,
            args.window,
            args.peers_python,
            args.rounds,
        )
    print("\n".join(markdown(got)))
    for e in got["errors"]:
        print(f"failed: {e['system']} {e['workload']}: {e['error']}", file=sys.stderr)
    if args.json:
        print(json.dumps(got))
    return 1 if got["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
