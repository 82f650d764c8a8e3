"""Where a step's processor time goes: one agent, a model over HTTP, SQLite.

``python -m bench.where [--steps N] [--result-bytes B]`` runs the bench agent
with ``provider: openai`` against :mod:`bench.fake_model` (zero latency, in a
process of its own), first without a profiler (the processor time per step),
then the same number of steps under ``cProfile`` with the process's processor
time as its clock. It prints each part's share of the profiled time, grouped by
where the code lives (a package of stead, or a library), so the shares, not
the profiler's inflated milliseconds, are what to read. docs/benchmarks.md
quotes it.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from collections import Counter
from pathlib import Path

from stead import Runtime

from . import workload
from .fake_model import FakeModelServer


def _part(filename: str) -> str:
    if "/site-packages/" in filename:
        return filename.split("/site-packages/")[1].split("/")[0]
    if "/src/stead/" in filename:
        inner = filename.split("/src/stead/")[1]
        return "stead." + inner.split("/")[0].removesuffix(".py")
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C: JSON, hashing, sockets, SQLite)"
    return "python stdlib"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--result-bytes", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d, FakeModelServer() as url:
        work = Path(d)
        model = {"provider": "openai", "name": "bench", "base_url": url,
                 "context_window": 1_000_000, "max_tokens": 512}  # fmt: skip
        rt = Runtime(f"sqlite:///{work / 'where.db'}", data_dir=work / "data")
        agent = rt.create(workload.spec(work, model=model)).agent_id
        tools = workload.tools(args.result_bytes)
        rt.run(agent, tools=tools, max_steps=20)  # warm: imports, first connection
        c0 = time.process_time()
        rt.run(agent, tools=tools, max_steps=args.steps)
        plain = (time.process_time() - c0) * 1e3 / args.steps
        profile = cProfile.Profile(time.process_time)
        profile.enable()
        rt.run(agent, tools=tools, max_steps=args.steps)
        profile.disable()
        rt.close()
    stats = pstats.Stats(profile)
    parts: Counter[str] = Counter()
    for (filename, _, _), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        parts[_part(filename)] += own
    total = sum(parts.values())
    print(f"processor time per step without the profiler: {plain:.2f} ms ({args.steps} steps)")
    print("share of the profiled processor time, by where the code lives:")
    for part, own in parts.most_common(14):
        print(f"  {100 * own / total:5.1f}%  {part}")


if __name__ == "__main__":
    main()
