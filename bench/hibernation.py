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

import gc
import json
import os
import random
import shutil
import sqlite3
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from stead import Event, Kind, Runtime, ScriptedModel, parse_spec
from stead.runtime.hibernation import hibernate
from stead.runtime.worker import Worker
from stead.store.sqlite import SqliteStore

from .machine import loadavg
from .stats import median, pct

SIZES_MB = (1, 10, 50)
REPS: dict[int, int] = {1: 30, 10: 15, 50: 7}
"""Counted hibernate/wake cycles per workspace size (MB)."""
QUICK_REPS: dict[int, int] = {1: 5, 10: 3, 50: 2}
WARMUP = 1
FILES = 32
AGENTS = 10_000
MEMORY_AT = 1_000
MEMORY_REPS = 3
TIMING_SAMPLE = 200
"""The many-agents run reports how long its first this-many agents took."""
TARGETS = {
    "wake_p50_ms": {1: 50.0, 50: 1500.0},
    "hibernate_ms": {50: 1000.0},
}
TOOLS = ["read_file", "write_file", "list_files"]

Say = Callable[[str], None]


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- workspace content -------------------------------------------------------------

_LINES = (
    "def {0}_{1}({2}, {3}={n}):\n",
    "    {0} = {1}.{2}({3}, {n})\n",
    "    if {0} > {n}:\n",
    "        return {0}_{1} + {n}\n",
    "# {0} {1} {2} {3}\n",
    "class {0}{1}({2}):\n",
    "    {0}: int = {n}\n",
    "import {0}.{1}\n",
    "    for {0} in range({n}):\n",
    '        log.info("{0} {1} %s", {2})\n',
)


def vocabulary(rng: random.Random, n: int = 1000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz_"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(n)]


def code_text(rng: random.Random, vocab: Sequence[str], size: int) -> str:
    """About ``size`` characters of code-like lines over ``vocab``."""
    parts: list[str] = []
    total = 0
    while total < size:
        words = rng.choices(vocab, k=4 * 64)
        lines = rng.choices(_LINES, k=64)
        for j, t in enumerate(lines):
            line = t.format(*words[4 * j : 4 * j + 4], n=rng.randrange(1000))
            parts.append(line)
            total += len(line)
    return "".join(parts)[:size]


README = "# Project\n\nThe agent reads this file after every wake.\n" * 4


def fill_workspace(folder: Path, total_bytes: int, files: int, seed: int) -> dict[str, int]:
    """Write ``total_bytes`` into ``files`` files: half code-like text, half random."""
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    text_files = max(1, files // 2)
    bin_files = max(1, files - text_files)
    half = total_bytes // 2
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    (folder / "README.md").write_text(README, encoding="utf-8")
    for i in range(text_files):
        n = half // text_files
        (folder / "src" / f"mod_{i:03d}.py").write_text(code_text(rng, vocab, n), "utf-8")
    for i in range(bin_files):
        n = (total_bytes - half) // bin_files
        (folder / "data" / f"blob_{i:03d}.bin").write_bytes(rng.randbytes(n))
    return {
        "text_files": text_files,
        "text_bytes": half // text_files * text_files,
        "random_files": bin_files,
        "random_bytes": (total_bytes - half) // bin_files * bin_files,
        "readme_bytes": len(README),
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
            "db_bytes": db.stat().st_size + _size(db.with_name(db.name + "-wal")),
        }
    finally:
        rt.close()


# -- 2. and 3. many hibernated agents: disk, and the worker's memory ------------------


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _tree_bytes(root: Path) -> tuple[int, int, int]:
    """(files, apparent bytes, allocated bytes) of the regular files under ``root``."""
    files = apparent = allocated = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            files += 1
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return files, apparent, allocated


def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def memory_probe(rt: Runtime, reps: int = MEMORY_REPS) -> dict[str, Any]:
    """Peak memory and time of one idle worker pass, and of the store's work query."""

    def worker_pass() -> int:
        r = Worker(rt).run_until_idle()
        if r.ran or r.errors or r.hibernated:
            raise RuntimeError(f"hibernation bench: an idle worker pass did something: {r}")
        return 0

    def hibernating_pass() -> int:
        r = Worker(rt, hibernate_after=3600).run_until_idle()
        if r.ran or r.errors or r.hibernated:
            raise RuntimeError(f"hibernation bench: an idle worker pass did something: {r}")
        return 0

    def to_run() -> int:
        found = rt.store.agents_to_run(rt.clock.now())
        if found:
            raise RuntimeError(f"hibernation bench: {len(found)} agents are runnable")
        return 0

    probes: dict[str, Callable[[], int]] = {
        "worker_pass": worker_pass,
        "worker_pass_hibernate_after": hibernating_pass,
        "agents_to_run": to_run,
    }
    out: dict[str, Any] = {}
    for name, fn in probes.items():
        fn()  # warm-up
        ms, rss_peak = [], []
        can_reset = True
        for _ in range(reps):
            gc.collect()
            before = _status_kb("VmRSS")
            can_reset = _reset_peak_rss() and can_reset
            t0 = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t0) * 1e3)
            after = _status_kb("VmHWM") if can_reset else _status_kb("VmRSS")
            rss_peak.append(max(0, after - before) * 1024)
        traced = []
        tracemalloc.start()
        try:
            for _ in range(reps):
                gc.collect()
                tracemalloc.reset_peak()
                base = tracemalloc.get_traced_memory()[0]
                fn()
                traced.append(tracemalloc.get_traced_memory()[1] - base)
        finally:
            tracemalloc.stop()
        out[name] = {
            "traced_peak_bytes": median(traced),
            "rss_peak_delta_bytes": median(rss_peak),
            "rss_measure": "VmHWM after reset - VmRSS before" if can_reset else "VmRSS delta",
            "ms": median(ms),
        }
    out["process_rss_bytes"] = _status_kb("VmRSS") * 1024
    return out


def _db_tables(db: Path) -> dict[str, int]:
    """Bytes of pages per table and index (SQLite's dbstat), if this SQLite has it."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.Error:
        return {}
    finally:
        con.close()
    return {str(n): int(b) for n, b in sorted(rows, key=lambda r: -int(r[1]))}


def _journal(db: Path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        events, journal = con.execute(
            "SELECT COUNT(*), SUM(LENGTH(agent_id) + 8 + LENGTH(kind) + 8 + LENGTH(data) "
            "+ LENGTH(prev_hash) + LENGTH(hash) + 8) FROM events"
        ).fetchone()
        (state,) = con.execute("SELECT SUM(LENGTH(state) + LENGTH(spec)) FROM agents").fetchone()
        (manifests,) = con.execute("SELECT SUM(LENGTH(manifest)) FROM snapshots").fetchone()
    finally:
        con.close()
    return {
        "events": int(events),
        "journal_bytes": int(journal or 0),
        "agent_rows_bytes": int(state or 0),
        "snapshot_manifest_bytes": int(manifests or 0),
    }


def _agent_files(seed: Path, rng: random.Random, vocab: Sequence[str], i: int) -> None:
    (seed / "main.py").write_text(f"# agent {i}\n" + code_text(rng, vocab, 1800), "utf-8")
    (seed / "README.md").write_text(
        f"# Task {i}\n\n" + " ".join(rng.choices(vocab, k=100)) + "\n", "utf-8"
    )
    (seed / "data.bin").write_bytes(rng.randbytes(512))


def measure_many(
    workdir: Path, agents: int = AGENTS, memory_at: int = MEMORY_AT, say: Say = _stderr
) -> dict[str, Any]:
    """Create, run and hibernate ``agents`` small agents; disk per agent; worker memory."""
    workdir.mkdir(parents=True, exist_ok=True)
    seed = workdir / "seed"
    seed.mkdir()
    script = [
        {"tool": "write_file", "args": {"path": "notes.md", "content": "notes\n"}},
        {"wait_for_input": "anything else?"},
    ]
    (workdir / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec(
        {
            "name": "idle",
            "instructions": "Take a note, then wait for the next request.",
            "model": "scripted:script.yaml",
            "tools": TOOLS,
            "workspace": "seed",
        },
        workdir,
    )
    rng = random.Random(7)
    vocab = vocabulary(rng)
    db = workdir / "stead.db"
    data = workdir / "data"
    rt = Runtime(SqliteStore(db), data)
    checkpoints = sorted({n for n in (memory_at, agents) if 0 < n <= agents})
    memory: list[dict[str, Any]] = []
    raw = stored = files = 0
    sample_s = None
    probe_s = 0.0  # time in memory probes, left out of build_s
    try:
        started = time.perf_counter()
        for i in range(agents):
            _agent_files(seed, rng, vocab, i)  # the spec's folder, with new content each time
            agent = rt.create(spec).agent_id
            note = f"agent {i}: " + " ".join(rng.choices(vocab, k=40)) + "\n"
            model = ScriptedModel.from_data(
                [
                    {"tool": "write_file", "args": {"path": "notes.md", "content": note}},
                    {"wait_for_input": "anything else?"},
                ]
            )
            if rt.run(agent, model=model).state.status != "waiting":
                raise RuntimeError(f"hibernation bench: agent {i} did not reach its wait")
            snap = hibernate(rt, agent)
            raw += snap.bytes
            stored += snap.stored_bytes
            files += snap.files
            n = i + 1
            if n == min(TIMING_SAMPLE, agents):
                sample_s = time.perf_counter() - started
                say(
                    f"hibernation: the first {n} agents took {sample_s:.1f} s "
                    f"({sample_s / n * 1e3:.1f} ms each)"
                )
            if n in checkpoints:
                build_s = time.perf_counter() - started - probe_s
                t0 = time.perf_counter()
                memory.append({"agents": n, **memory_probe(rt)})
                probe_s += time.perf_counter() - t0
                say(
                    f"hibernation: {n:,} agents hibernated ({build_s:.0f} s); an idle worker "
                    f"pass peaks at {memory[-1]['worker_pass']['traced_peak_bytes'] / 1e3:.0f} kB"
                )
        build_s = time.perf_counter() - started - probe_s
        db_bytes, wal_bytes = _size(db), _size(db.with_name(db.name + "-wal"))
        tables = _db_tables(db)
        journal = _journal(db)
    finally:
        rt.close()
    blob_files, blob_bytes, blob_alloc = _tree_bytes(data / "blobs")
    ws_files, ws_bytes, _ = _tree_bytes(data / "workspaces")
    disk = db_bytes + wal_bytes + blob_bytes
    per = {
        "db_bytes": (db_bytes + wal_bytes) / agents,
        "blob_bytes": blob_bytes / agents,
        "blob_allocated_bytes": blob_alloc / agents,
        "disk_bytes": disk / agents,
        "disk_allocated_bytes": (db_bytes + wal_bytes + blob_alloc) / agents,
        "workspace_bytes": raw / agents,
        "snapshot_stored_bytes": stored / agents,
        "journal_bytes": journal["journal_bytes"] / agents,
        "events": journal["events"] / agents,
        "files": files / agents,
    }
    per["reference_bytes"] = per["snapshot_stored_bytes"] + per["journal_bytes"]
    out: dict[str, Any] = {
        "agents": agents,
        "build_s": build_s,
        "memory_probe_s": probe_s,
        "build_ms_per_agent": build_s / agents * 1e3,
        "sample_agents": min(TIMING_SAMPLE, agents),
        "sample_s": sample_s,
        "db_bytes": db_bytes,
        "wal_bytes": wal_bytes,
        "blob_files": blob_files,
        "blob_bytes": blob_bytes,
        "blob_allocated_bytes": blob_alloc,
        "workspace_files_left": ws_files,
        "workspace_bytes_left": ws_bytes,
        "db_tables": tables,
        **{k: v for k, v in journal.items() if k != "events"},
        "per_agent": per,
        "x_reference": per["disk_bytes"] / per["reference_bytes"],
        "memory": memory,
    }
    if len(memory) == 2:
        lo, hi = memory
        out["memory_ratio"] = {
            name: {
                key: (hi[name][key] / lo[name][key]) if lo[name][key] else None
                for key in ("traced_peak_bytes", "rss_peak_delta_bytes", "ms")
            }
            for name in ("worker_pass", "worker_pass_hibernate_after", "agents_to_run")
        }
    return out


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
