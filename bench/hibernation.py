"""stead only: hibernating idle agents, waking them, and what an idle agent costs.

Three measurements, each in a fresh SQLite store and data folder:

1. **Hibernate and wake, per workspace size** (1, 10 and 50 MB). One agent is
   created from a spec whose ``workspace:`` folder holds the size given, split
   over ``files`` files: half of the bytes are code-like text (lines built
   from a random vocabulary; zstandard stores them at about a third) and half
   are random bytes (stored as they are), plus a small ``README.md``. Its
   script waits for input first, then, after every input, reads
   ``README.md`` (one tool step) and waits again, so one agent goes through
   any number of hibernate/wake cycles. A cycle: ``hibernate(rt, agent)``
   (timed; it removes the live folder), then the wake, timed from just before
   ``rt.send(agent, ...)`` to the ``on_commit`` of ``rt.run`` that carries the
   read step's ``step_completed`` (the activation restores the snapshot,
   recovers, makes the read step, and commits it with the next wait; the time
   until ``rt.run`` returns, after the lease is released, is kept too). The
   scripted model is built once and given to ``rt.run`` (``model=``), so its
   YAML is not re-read per wake; the tools are loaded as a worker loads them.
   One warm-up cycle per size is not counted. The blobs a wake reads were
   written moments before, so they come from the page cache, not the disk.
2. **Disk per hibernated agent**: ``agents`` agents (10,000 by default),
   each created through ``Runtime.create`` from a spec whose workspace folder
   is refilled with different content before every creation (a ``main.py``,
   a ``README.md`` and 512 random bytes, about 3 kB, unique per agent so that
   nothing is shared between agents' blobs), run with ``rt.run`` to its wait
   (its one step writes a unique ``notes.md``) and hibernated with
   ``hibernate``. Disk is the database file with its WAL, plus the blob
   folder; it is compared with each agent's compressed workspace (the sum of
   its snapshot's ``stored_bytes``) plus its journal (the bytes of its events'
   columns).
3. **Worker memory against the number of hibernated agents**: the peak of
   ``tracemalloc`` and of the process's resident set (``VmHWM``, reset through
   ``/proc/self/clear_refs``) during one ``Worker(rt).run_until_idle()`` (a
   pass that finds nothing to run), one ``Worker(rt, hibernate_after=3600)``
   pass (which also asks for idle agents) and one ``store.agents_to_run(now)``,
   when ``memory_at`` agents (1,000) are hibernated and again at ``agents``.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from stead import Event, Kind, Runtime, ScriptedModel, parse_spec
from stead.snapshots.hibernation import hibernate
from stead.store.sqlite import SqliteStore

from .hibernation_many import AGENTS, MEMORY_AT, TOOLS, Say, _stderr, file_size, measure_many
from .machine import loadavg
from .stats import median, pct
from .workspace_content import fill_workspace

SIZES_MB = (1, 10, 50)
REPS: dict[int, int] = {1: 30, 10: 15, 50: 7}
"""Counted hibernate/wake cycles per workspace size (MB)."""
QUICK_REPS: dict[int, int] = {1: 5, 10: 3, 50: 2}
WARMUP = 1
FILES = 32
TARGETS = {
    "wake_p50_ms": {1: 50.0, 50: 1500.0},
    "hibernate_ms": {50: 1000.0},
}


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": median(values),
        "p90": pct(values, 90),
        "p99": pct(values, 99),
        "min": min(values),
        "max": max(values),
    }


# -- 1. hibernate and wake, per size -----------------------------------------------


def measure_size(workdir: Path, mb: int, reps: int, files: int = FILES) -> dict[str, Any]:
    """Hibernate/wake cycles of one agent whose workspace holds ``mb`` MB."""
    seed = workdir / "seed"
    seed.mkdir(parents=True)
    t0 = time.perf_counter()
    mix = fill_workspace(seed, mb * 1_000_000, files, seed=mb)
    generate_s = time.perf_counter() - t0
    script: list[dict[str, Any]] = [{"wait_for_input": "what next?"}]
    for _ in range(WARMUP + reps):
        script += [
            {"tool": "read_file", "args": {"path": "README.md"}},
            {"wait_for_input": "what next?"},
        ]
    (workdir / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    model = ScriptedModel.from_data(script, "hibernation bench script")
    spec = parse_spec(
        {
            "name": f"hibernation-{mb}mb",
            "instructions": "Read the README whenever someone writes.",
            "model": "scripted:script.yaml",
            "tools": TOOLS,
            "workspace": "seed",
            "limits": {"max_steps": 1_000_000},
        },
        workdir,
    )
    rt = Runtime(SqliteStore(workdir / "stead.db"), workdir / "data")
    try:
        t0 = time.perf_counter()
        agent = rt.create(spec).agent_id
        create_s = time.perf_counter() - t0
        shutil.rmtree(seed)
        first = rt.run(agent, model=model)
        if first.state.status != "waiting":
            raise RuntimeError(f"hibernation bench: agent is {first.state.status}, not waiting")
        live = rt.workspace(agent, first.state.tenant).root

        commits: list[tuple[float, list[Event]]] = []

        def on_commit(events: Sequence[Event]) -> None:
            commits.append((time.perf_counter(), list(events)))

        def first_commit(kind: str) -> float:
            for at, events in commits:
                if any(e.kind == kind for e in events):
                    return at
            raise RuntimeError(f"hibernation bench: no {kind} event was committed")

        cycles: list[dict[str, float]] = []
        snap = None
        for i in range(WARMUP + reps):
            t0 = time.perf_counter()
            snap = hibernate(rt, agent)
            hib_ms = (time.perf_counter() - t0) * 1e3
            if live.exists():
                raise RuntimeError("hibernation bench: the live workspace was not removed")
            commits.clear()
            t0 = time.perf_counter()
            rt.send(agent, f"wake {i}")
            sent = time.perf_counter()
            out = rt.run(agent, model=model, on_commit=on_commit)
            returned = time.perf_counter()
            if out.state.status != "waiting" or out.steps != 2:
                raise RuntimeError(
                    f"hibernation bench: a wake ended {out.state.status} after {out.steps} "
                    "decisions, not waiting after 2"
                )
            read = [c for c in out.state.recent_calls if c["tool"] == "read_file"]
            if not read or not read[-1]["ok"] or not live.is_dir():
                raise RuntimeError("hibernation bench: the read step after a wake failed")
            if i < WARMUP:
                continue
            cycles.append(
                {
                    "hibernate_ms": hib_ms,
                    "wake_ms": (first_commit(Kind.STEP_COMPLETED) - t0) * 1e3,
                    "wake_return_ms": (returned - t0) * 1e3,
                    "send_ms": (sent - t0) * 1e3,
                    "restored_ms": (first_commit(Kind.RESTORED) - t0) * 1e3,
                    "started_ms": (first_commit(Kind.ACTIVATION_STARTED) - t0) * 1e3,
                }
            )
        assert snap is not None
        kinds = [e.kind for e in rt.store.read_events(agent)]
        db = workdir / "stead.db"
        return {
            "mb": mb,
            "files": snap.files,
            "bytes": snap.bytes,
            "stored_bytes": snap.stored_bytes,
            "stored_ratio": snap.stored_bytes / snap.bytes,
            "mix": mix,
            "reps": reps,
            "warmup": WARMUP,
            "generate_s": generate_s,
            "create_s": create_s,
            "hibernate_ms": _stats([c["hibernate_ms"] for c in cycles]),
            "wake_ms": _stats([c["wake_ms"] for c in cycles]),
            "wake_return_ms": _stats([c["wake_return_ms"] for c in cycles]),
            "send_ms": median(c["send_ms"] for c in cycles),
            "restored_ms": median(c["restored_ms"] for c in cycles),
            "started_ms": median(c["started_ms"] for c in cycles),
            "cycles": cycles,
            "snapshots": kinds.count(Kind.HIBERNATED),
            "restores": kinds.count(Kind.RESTORED),
            "events": len(kinds),
            "db_bytes": db.stat().st_size + file_size(db.with_name(db.name + "-wal")),
        }
    finally:
        rt.close()


# -- all of it ----------------------------------------------------------------------


def mix_text(files: int) -> str:
    return (
        f"half the bytes in {max(1, files // 2)} code-like text files, half in "
        f"{max(1, files - files // 2)} files of random bytes, plus a README.md"
    )


def measure(
    workdir: Path,
    sizes_mb: Sequence[int] = SIZES_MB,
    reps: Mapping[int, int] = REPS,
    files: int = FILES,
    agents: int = AGENTS,
    memory_at: int = MEMORY_AT,
    say: Say = _stderr,
) -> dict[str, Any]:
    """Hibernate/wake times per workspace size; disk and worker memory with many agents."""
    workdir.mkdir(parents=True, exist_ok=True)
    load_start = loadavg()
    started = time.perf_counter()
    sizes = []
    for mb in sizes_mb:
        n = reps.get(mb, min(reps.values()) if reps else 5)
        d = workdir / f"size-{mb}mb"
        try:
            row = measure_size(d, mb, n, files)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        sizes.append(row)
        say(
            f"hibernation {mb} MB: hibernate {row['hibernate_ms']['median']:.0f} ms; "
            f"wake to next step p50 {row['wake_ms']['median']:.0f} ms, "
            f"p99 {row['wake_ms']['p99']:.0f} ms ({n} cycles)"
        )
    many = None
    if agents > 0:
        d = workdir / "many"
        try:
            many = measure_many(d, agents, memory_at if memory_at < agents else agents // 10, say)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        say(
            f"hibernation: {many['per_agent']['disk_bytes']:,.0f} bytes of disk per hibernated "
            f"agent ({agents:,} agents)"
        )
    return {
        "mix": mix_text(files),
        "files": files,
        "warmup": WARMUP,
        "sizes": sizes,
        "many": many,
        "targets": {k: {str(mb): v for mb, v in t.items()} for k, t in TARGETS.items()},
        "wall_s": time.perf_counter() - started,
        "loadavg_start": load_start,
        "loadavg_end": loadavg(),
    }


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import tempfile
    from datetime import UTC, datetime

    p = argparse.ArgumentParser(prog="python -m bench.hibernation", description=__doc__)
    p.add_argument(
        "--sizes", type=_ints, default=list(SIZES_MB), help="workspace sizes in MB (1,10,50)"
    )
    p.add_argument(
        "--reps",
        type=_ints,
        default=None,
        help="hibernate/wake cycles per size, in the order of --sizes (30,15,7)",
    )
    p.add_argument("--files", type=int, default=FILES, help=f"files per workspace ({FILES})")
    p.add_argument(
        "--agents", type=int, default=AGENTS, help=f"hibernated agents; 0 skips ({AGENTS})"
    )
    p.add_argument(
        "--memory-at",
        type=int,
        default=MEMORY_AT,
        help=f"also measure worker memory at this many agents ({MEMORY_AT})",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="where the stores go; the disk under it is what is measured (bench/)",
    )
    args = p.parse_args(argv)
    if args.reps is None:
        reps = {mb: REPS.get(mb, 7) for mb in args.sizes}
    elif len(args.reps) != len(args.sizes):
        p.error("--reps: give one count per size")
    else:
        reps = dict(zip(args.sizes, args.reps, strict=True))
    if min(reps.values(), default=1) < 1:
        p.error("--reps: at least one cycle per size")
    args.workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".work-", dir=args.workdir) as tmp:
        result = measure(Path(tmp), args.sizes, reps, args.files, args.agents, args.memory_at)
    result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
