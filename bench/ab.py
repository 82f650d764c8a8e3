"""W1 between source trees, interleaved in one sitting: ``python -m bench.ab NAME=PATH ...``.

Each round runs one agent for ``--steps`` steps (W1, SQLite, scripted model) in
each tree, in a rotating order, each in a fresh process whose ``stead`` and
``bench`` come from that tree; it prints each run, then the median ms per step
of each tree and its ratio to the first. A tree is any checkout, for example
``git worktree add /tmp/base HEAD~3``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CODE = r"""
import json, sys, tempfile
from pathlib import Path
import stead
from bench.steps import measure
with tempfile.TemporaryDirectory() as d:
    r = measure(Path(d), int(sys.argv[1]))
print(json.dumps({"file": stead.__file__, "ms": r["ms_per_step"]}))
"""


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    p.add_argument("trees", nargs="+", help="NAME=PATH of a source tree; the first is the base")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=1000)
    args = p.parse_args(argv)
    trees = dict(t.split("=", 1) for t in args.trees)
    runs: dict[str, list[float]] = {name: [] for name in trees}
    names = list(trees)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            tree = os.path.abspath(trees[name])
            env = {**os.environ, "PYTHONPATH": f"{tree}/src{os.pathsep}{tree}"}
            done = subprocess.run(
                [sys.executable, "-c", CODE, str(args.steps)],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(done.stdout.strip().splitlines()[-1])
            if not result["file"].startswith(tree):
                raise SystemExit(f"{name}: stead came from {result['file']}, not {tree}")
            runs[name].append(result["ms"])
            print(f"round {r + 1} {name}: {result['ms']:.4f} ms/step", flush=True)
    base = statistics.median(runs[names[0]])
    for name in names:
        median = statistics.median(runs[name])
        print(f"{name}: median {median:.4f} ms/step, {median / base:.4f} x {names[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
