"""stead only: many hibernated agents, what each costs on disk, and a worker's memory.

The second and third measurements of :mod:`bench.hibernation` (see its
docstring): ``agents`` small agents are created, run to their wait and
hibernated one after another in one SQLite store; disk per agent is compared
with each agent's compressed workspace plus its journal, and a worker's memory
is probed at ``memory_at`` agents and again at ``agents``.
"""

from __future__ import annotations

import gc
import itertools
import os
import random
import sqlite3
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
import zstandard

from stead import Runtime, ScriptedModel, parse_spec
from stead.snapshots.hibernation import hibernate
from stead.store import codec
from stead.store.sqlite import SqliteStore
from stead.workers.threaded import Worker

from .stats import median
from .workspace_content import code_text, vocabulary

AGENTS = 10_000
MEMORY_AT = 1_000
MEMORY_REPS = 3
TIMING_SAMPLE = 200
"""The many-agents run reports how long its first this-many agents took."""
TOOLS = ["read_file", "write_file", "list_files"]

Say = Callable[[str], None]


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- 2. and 3. many hibernated agents: disk, and the worker's memory ------------------


def file_size(path: Path) -> int:
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
    """The journal as its canonical bytes (each event's columns, its data and hashes as
    the text they were hashed as, whatever the store keeps at rest), and those bytes
    compressed agent by agent on their own (zstandard, level 3, no dictionary)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    events = journal = packed = 0
    try:
        rows = con.execute(
            "SELECT agent_id, seq, kind, at, data, prev_hash, hash, epoch FROM events "
            "ORDER BY agent_id, seq"
        )
        one = zstandard.ZstdCompressor(level=3)
        for _, group in itertools.groupby(rows, key=lambda r: r[0]):
            agent_rows = list(group)
            events += len(agent_rows)
            # counted as before compression existed: the text's characters, 8 bytes a number
            canonical = [
                (a, k, codec.unpack(d, "event"), codec.unpack_hash(p), codec.unpack_hash(h))
                for a, _, k, _, d, p, h, _ in agent_rows
            ]
            journal += sum(
                len(a) + len(k) + len(d) + len(p) + len(h) + 24 for a, k, d, p, h in canonical
            )
            text = "".join(
                f"{a}{r[1]}{k}{r[3]!r}{d}{p}{h}{r[7]}"
                for r, (a, k, d, p, h) in zip(agent_rows, canonical, strict=True)
            ).encode("utf-8")
            packed += len(one.compress(text))
        (state,) = con.execute("SELECT SUM(LENGTH(state) + LENGTH(spec)) FROM agents").fetchone()
        (manifests,) = con.execute("SELECT SUM(LENGTH(manifest)) FROM snapshots").fetchone()
    finally:
        con.close()
    return {
        "events": events,
        "journal_bytes": journal,
        "journal_zstd_bytes": packed,
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
        db_bytes, wal_bytes = file_size(db), file_size(db.with_name(db.name + "-wal"))
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
    per["journal_zstd_bytes"] = journal["journal_zstd_bytes"] / agents
    per["reference_zstd_bytes"] = per["snapshot_stored_bytes"] + per["journal_zstd_bytes"]
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
        "x_reference_zstd": per["disk_bytes"] / per["reference_zstd_bytes"],
        "x_reference_no_wal": (per["disk_bytes"] - wal_bytes / agents) / per["reference_bytes"],
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
