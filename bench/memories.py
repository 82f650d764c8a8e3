"""stead only: recall over 100,000 long-term memories (``python -m bench.memories``).

For each dimension (384 and 1536 by default), ``count`` memories of one agent are
seeded into a SQLite store (one transaction of plain INSERTs into the table
:mod:`stead.store.memory_rows` makes: the seeding is not what is measured) with
random unit vectors, and top-k recall (k = 5) is timed as an agent's recall runs
it, the query's embedding aside (that is the provider's time):

- ``first``: the first recall in a process, which loads the owner's vectors from
  the store into one matrix (:mod:`stead.memories.search`);
- ``warm``: every later recall: one indexed read of the owner's ``changed`` count
  (is the matrix current?) and the search, median and p95 over ``queries``, with
  the processor time per recall;
- ``after a write``: a recall right after a memory was saved (the matrix loaded
  again).

The search runs with numpy (the ``memory`` extra) and, for comparison, in plain
Python (the fallback without numpy) over ``python_count`` memories. No vector
extension is measured: the Python here cannot load SQLite extensions
(sqlite-vec), and pgvector is not installable on this machine (see
bench/results/memories.md). Writes bench/results/memories.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stead.memories import search
from stead.memories.search import ExactIndex
from stead.memories.vectors import pack
from stead.store.memory_rows import MemoryRow
from stead.store.sqlite import SqliteStore

RESULTS = Path(__file__).resolve().parent / "results" / "memories.md"
TENANT, OWNER, EMBEDDER = "default", "ag_bench", "bench"


def unit_vectors(count: int, dim: int, seed: int) -> list[bytes]:
    """``count`` random unit vectors as float32 bytes (numpy when there is one)."""
    try:
        import numpy as np
    except ImportError:
        rng = random.Random(seed)
        return [pack([rng.gauss(0, 1) for _ in range(dim)]) for _ in range(count)]
    gen = np.random.default_rng(seed)
    m = gen.standard_normal((count, dim)).astype("<f4")
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return [row.tobytes() for row in m]


def seed_store(store: SqliteStore, vectors: list[bytes]) -> None:
    """The memories, inserted in one transaction (as put_memory writes them)."""
    body = '{"made_at":0,"made_by":"bench","provenance":{},"source":"model","text":"a fact"}'
    rows = [
        (f"mem_{i:08d}", TENANT, OWNER, body, EMBEDDER, v, i + 1) for i, v in enumerate(vectors)
    ]
    with store._tx() as db:
        db.executemany(
            "INSERT INTO memories (memory_id, tenant, owner, body, embedder, vector, changed, "
            "forgotten) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
            rows,
        )


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall and processor milliseconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def measure(dim: int, count: int, queries: int, folder: Path) -> dict[str, Any]:
    how = "numpy" if search.HAVE_NUMPY else "python"
    store = SqliteStore(folder / f"memories-{dim}-{how}.db")
    seed_store(store, unit_vectors(count, dim, seed=dim))
    index = ExactIndex(store)
    asked = unit_vectors(queries, dim, seed=dim + 1)

    def recall(q: bytes) -> Callable[[], Any]:
        return lambda: index.search(TENANT, [OWNER], EMBEDDER, q, 5)

    first, first_cpu = timed(recall(asked[0]))
    warm = [timed(recall(q)) for q in asked]
    walls, cpus = [w for w, _ in warm], [c for _, c in warm]
    vector = unit_vectors(1, dim, seed=7)[0]
    store.put_memory(MemoryRow("mem_new", TENANT, OWNER, "a new fact", "model", EMBEDDER, vector))
    after, _ = timed(recall(asked[1]))
    found = index.search(TENANT, [OWNER], EMBEDDER, vector, 1)
    assert found[0].row.memory_id == "mem_new", "exact search must find the memory just saved"
    store.close()
    return {
        "dim": dim, "count": count, "first_ms": first, "first_cpu_ms": first_cpu,
        "median_ms": statistics.median(walls), "p95_ms": p95(walls),
        "cpu_ms": statistics.median(cpus), "after_write_ms": after,
    }  # fmt: skip


def measure_python(dim: int, count: int, queries: int, folder: Path) -> dict[str, Any]:
    """The same warm recall without numpy (the fallback), over fewer memories."""
    saved = search.HAVE_NUMPY
    search.HAVE_NUMPY = False
    try:
        return measure(dim, count, queries, folder)
    finally:
        search.HAVE_NUMPY = saved


def table(rows: list[dict[str, Any]], how: str) -> list[str]:
    lines = [
        "| search | dim | memories | first recall (ms) | warm median (ms) | warm p95 (ms) "
        "| CPU per recall (ms) | after a write (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {how} | {r['dim']} | {r['count']:,} | {r['first_ms']:.0f} | {r['median_ms']:.2f} "
            f"| {r['p95_ms']:.2f} | {r['cpu_ms']:.2f} | {r['after_write_ms']:.0f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memories", description=__doc__)
    p.add_argument("--count", type=int, default=100_000, help="memories per run (100000)")
    p.add_argument("--dims", default="384,1536", help="dimensions (384,1536)")
    p.add_argument("--queries", type=int, default=200, help="warm recalls timed (200)")
    p.add_argument("--python-count", type=int, default=10_000,
                   help="memories for the plain-Python fallback (10000; 0 skips)")  # fmt: skip
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    dims = [int(d) for d in args.dims.split(",") if d]
    with tempfile.TemporaryDirectory(prefix="stead-bench-memories-") as tmp:
        fast = [measure(d, args.count, args.queries, Path(tmp)) for d in dims]
        slow = (
            [measure_python(d, args.python_count, 20, Path(tmp)) for d in dims]
            if args.python_count
            else []
        )
    import numpy

    lines = [
        "# Recall over long-term memories",
        "",
        f"`python -m bench.memories` on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, numpy {numpy.__version__}, SQLite store; "
        "top 5 of one agent's memories; the query's embedding (the provider's) is not timed.",
        "",
        *table(fast, "exact, numpy"),
        *table(slow, "exact, plain Python")[2:],
        "",
        "`first recall`: the first in a process, which loads the owner's vectors from the "
        "store; `warm`: every later one (the owner's write count read, then the search); "
        "`after a write`: a recall right after a save, which applies that one row. CPU time "
        "can pass wall time: numpy's matrix product runs on both cores.",
        "",
        "No vector extension was measured: this Python's `sqlite3` cannot load extensions "
        "(`enable_load_extension` is missing), so sqlite-vec cannot be used, and there is no "
        "pgvector package for this machine's PostgreSQL (15) in its apt sources. Exact search "
        "is what runs here, on every backend.",
    ]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
