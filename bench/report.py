"""Turning measurements into medians, a printed table, and bench/results/latest.{json,md}."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from . import comparison, curve, postgres_report
from .resume import History
from .stats import median
from .workload import STEP_KINDS

STEP_KEYS = (
    "steps_per_s",
    "ms_per_step",
    "p90_ms_per_step",
    "p99_ms_per_step",
    "commits_per_step",
    "events_per_step",
    "state_bytes",
    "wall_ms_per_step",
    "cpu_ms_per_step",
    "commit_ms_per_step",
    "write_ms_per_step",
    "sql_commit_ms_per_step",
    "sql_other_ms_per_step",
    "write_python_ms_per_step",
    "store_other_ms_per_step",
    "other_ms_per_step",
)
RESUME_KEYS = ("resume_ms", "open_ms", "run_ms", "load_ms", "close_ms", "process_ms")


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _med(rows: Iterable[Mapping[str, Any]], key: str) -> float:
    return median(float(r[key]) for r in rows)


def summarise(
    info: dict[str, Any],
    config: dict[str, Any],
    rounds: Mapping[str, Sequence[dict[str, Any]]],
    histories: Sequence[History],
    resumes: Mapping[int, Sequence[dict[str, Any]]],
) -> dict[str, Any]:
    """Medians over rounds (and the raw per-round figures) as one JSON-able dict."""
    fl = rounds["floor"]
    floor_ms = _med(fl, "median_ms")
    floor = {
        "median_ms": floor_ms,
        "commits_per_s": 1e3 / floor_ms,
        "p90_ms": _med(fl, "p90_ms"),
        "p99_ms": _med(fl, "p99_ms"),
        "round_medians_ms": [r["median_ms"] for r in fl],
        "rounds": list(fl),
    }

    def steps_summary(rs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {k: _med(rs, k) for k in STEP_KEYS}
        rates = [r["steps_per_s"] for r in rs]
        out["steps_per_s_range"] = [min(rates), max(rates)]
        out["rounds"] = list(rs)
        return out

    sqlite = steps_summary(rounds["sqlite"])
    # paired by round: each steps run against the floor measured next to it
    sqlite["x_floor"] = median(
        st["ms_per_step"] / fr["median_ms"] for st, fr in zip(rounds["sqlite"], fl, strict=True)
    )
    sqlite["commit_floor_ms_per_step"] = sqlite["commits_per_step"] * floor_ms
    sqlite["above_floor_ms_per_step"] = sqlite["ms_per_step"] - sqlite["commit_floor_ms_per_step"]
    sqlite["ms_per_commit_statement"] = (
        sqlite["sql_commit_ms_per_step"] / sqlite["commits_per_step"]
    )
    memory = steps_summary(rounds["memory"])
    all_steps = {"sqlite": sqlite, "memory": memory}
    if rounds.get("http_model"):
        http = steps_summary(rounds["http_model"])
        # paired by round with the scripted model's run next to it
        http["x_scripted"] = median(
            h["ms_per_step"] / st["ms_per_step"]
            for h, st in zip(rounds["http_model"], rounds["sqlite"], strict=True)
        )
        all_steps["http_model"] = http
    if rounds.get("sqlite_large"):
        large = steps_summary(rounds["sqlite_large"])
        large["output_bytes"] = rounds["sqlite_large"][0]["output_bytes"]
        large["x_small_outputs"] = large["ms_per_step"] / sqlite["ms_per_step"]
        all_steps["sqlite_large"] = large

    sizes = []
    for h in histories:
        rs = resumes[h.events]
        row: dict[str, Any] = {"events": h.events}
        row.update({k: _med(rs, k) for k in RESUME_KEYS})
        row["resume_ms_range"] = [min(r["resume_ms"] for r in rs), max(r["resume_ms"] for r in rs)]
        row.update(
            db_bytes=h.db_bytes,
            bytes_per_event=h.db_bytes / h.events,
            build_s=h.build_s,
            build_events_per_s=h.events / h.build_s,
            journal_commits=_med(rs, "journal_commits"),
            runs=[{k: r[k] for k in (*RESUME_KEYS, "version")} for r in rs],
        )
        sizes.append(row)
    resume: dict[str, Any] = {"sizes": sizes}
    if len(sizes) >= 2:
        first, last = sizes[0], sizes[-1]
        resume["ratio_largest_to_smallest"] = last["resume_ms"] / first["resume_ms"]
        prev = sizes[-2]
        resume["marginal_bytes_per_event"] = (last["db_bytes"] - prev["db_bytes"]) / (
            last["events"] - prev["events"]
        )
    return {
        "machine": info,
        "config": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in config.items()
            if k not in ("no_write", "keep")
        },
        "floor": floor,
        "steps": all_steps,
        "resume": resume,
    }


# -- printing -------------------------------------------------------------------


def _n(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


def summary_rows(res: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    f, s, m = res["floor"], res["steps"]["sqlite"], res["steps"]["memory"]
    cfg = res["config"]
    rows = [
        (
            "Floor: one durable SQLite commit",
            f"{_n(f['median_ms'], 3)} ms ({_n(f['commits_per_s'], 0)} commits/s)",
            f"p90 {_n(f['p90_ms'], 3)} ms, p99 {_n(f['p99_ms'], 3)} ms; "
            f"{cfg['floor_commits']} commits x {cfg['rounds']} rounds",
        ),
        (
            "Durable steps, one agent, SQLite",
            f"{_n(s['steps_per_s'], 0)} steps/s; {_n(s['ms_per_step'])} ms/step; "
            f"CPU {_n(s['cpu_ms_per_step'])} ms/step",
            f"{_n(s['x_floor'], 1)}x the floor (paired by round); "
            f"{_n(s['commits_per_step'], 1)} commits/step "
            f"(= {_n(s['commit_floor_ms_per_step'])} ms at the floor); p99 "
            f"{_n(s['p99_ms_per_step'])} ms; {cfg['steps']} steps x {cfg['rounds']} rounds",
        ),
        (
            "Same steps, memory store (no I/O)",
            f"{_n(m['steps_per_s'], 0)} steps/s; {_n(m['ms_per_step'])} ms/step; "
            f"CPU {_n(m['cpu_ms_per_step'])} ms/step",
            "the runtime's own CPU cost per step (and the memory store's JSON copies)",
        ),
    ]
    http = res["steps"].get("http_model")
    if http:
        rows.append(
            (
                "Same steps, a model over HTTP (OpenAI wire format, local, zero latency)",
                f"{_n(http['steps_per_s'], 0)} steps/s; {_n(http['ms_per_step'])} ms/step; "
                f"CPU {_n(http['cpu_ms_per_step'])} ms/step",
                f"{_n(http['x_scripted'], 1)}x the scripted model (paired by round): the "
                "runtime's own cost of rendering the conversation, the request and "
                f"checking the answer; {cfg['steps']} steps x {cfg['rounds']} rounds",
            )
        )
    large = res["steps"].get("sqlite_large")
    if large:
        rows.append(
            (
                f"Same steps on SQLite, {large['output_bytes']:,}-byte tool results",
                f"{_n(large['steps_per_s'], 0)} steps/s; {_n(large['ms_per_step'])} ms/step; "
                f"CPU {_n(large['cpu_ms_per_step'])} ms/step",
                f"{_n(large['x_small_outputs'], 1)}x the 100-byte case; the state every "
                f"commit rewrites is {large['state_bytes'] / 1e3:,.0f} kB "
                f"(vs {s['state_bytes'] / 1e3:,.1f} kB); {cfg['large_steps']} steps x "
                f"{cfg['rounds']} rounds",
            )
        )
    render = res.get("render")
    if render:
        rows.append(
            (
                f"Rendering a step of a {render['steps']:,}-step run in a "
                f"{render['window']:,}-token window",
                f"{_n(render['render_ms_first'], 3)} ms in the first tenth, "
                f"{_n(render['render_ms_last'], 3)} ms in the last",
                f"{_n(render['x_last_first'])}x: bounded by the window, not the history "
                f"({render['compactions']} compactions; model over local HTTP)",
            )
        )
        if render.get("compacting_step_ms") is not None:
            rows.append(
                (
                    "A step that compacts the conversation, in the same run",
                    f"{_n(render['compacting_step_ms'])} ms; CPU "
                    f"{_n(render['compacting_step_cpu_ms'])} ms",
                    f"against {_n(render['step_ms'])} ms (CPU {_n(render['step_cpu_ms'])} ms) "
                    f"for the others, medians; {render['compacting_steps']} compacting steps; "
                    "the fake model answers the summary at once",
                )
            )
    rows += sandbox_rows(res.get("sandbox"))
    rows += hibernation_rows(res.get("hibernation"))
    return rows


def sandbox_rows(sb: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """Rows per trivial command: one-shot and in a session, against a plain subprocess."""
    if not sb:
        return []
    if sb.get("skipped"):
        return [("Sandbox overhead", "not measured", str(sb["skipped"]))]
    if sb["pids_cgroup"]:
        cg = sb.get("cgroup_make_remove_ms") or {}
        cgroup = f"pids cgroup under {sb['pids_cgroup_root']}"
        if "median_ms" in cg:
            cgroup += f" (making + removing one: {_n(cg['median_ms'])} ms)"
    else:
        cgroup = "no pids cgroup (ulimit -u instead)"
    rows = []
    for c in sb["commands"].values():
        rows.append(
            (
                f"A command in the sandbox ({sb['sandbox']}): {shlex.join(c['argv'])}",
                f"{_n(c['sandbox_median_ms'])} ms vs {_n(c['plain_median_ms'])} ms plain: "
                f"+{_n(c['overhead_ms'])} ms ({_n(c['ratio'], 1)}x)",
                f"p90 {_n(c['sandbox_p90_ms'])} vs {_n(c['plain_p90_ms'])} ms; {cgroup}; "
                f"{sb['runs']} runs each way, alternating",
            )
        )
        if "session_median_ms" in c:
            start = sb["session_start_ms"]
            rows.append(
                (
                    f"The same in a sandbox session (one per activation): {shlex.join(c['argv'])}",
                    f"{_n(c['session_median_ms'])} ms vs {_n(c['plain_median_ms'])} ms plain: "
                    f"+{_n(c['session_overhead_ms'])} ms ({_n(c['session_ratio'], 1)}x)",
                    f"p90 {_n(c['session_p90_ms'])} ms; starting a session (its first "
                    f"/bin/true included) {_n(start['median_ms'])} ms, closing it "
                    f"{_n(sb['session_close_ms']['median_ms'])} ms, once per activation",
                )
            )
    return rows


def hibernation_rows(hb: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """Rows per workspace size (hibernate, wake), then disk and memory per idle agent."""
    if not hb:
        return []
    targets = hb["targets"]
    rows = []
    for z in hb["sizes"]:
        mb, wake, hib = str(z["mb"]), z["wake_ms"], z["hibernate_ms"]
        aims = []
        if mb in targets["wake_p50_ms"]:
            aims.append(f"wake p50 < {_n(targets['wake_p50_ms'][mb], 0)} ms")
        if mb in targets["hibernate_ms"]:
            aims.append(f"hibernate < {_n(targets['hibernate_ms'][mb], 0)} ms")
        rows.append(
            (
                f"Hibernate, then wake to the next step: {z['bytes'] / 1e6:,.0f} MB workspace "
                f"({z['files']} files)",
                f"wake p50 {_n(wake['median'], 1)} ms, p99 {_n(wake['p99'], 1)} ms; "
                f"hibernate {_n(hib['median'], 1)} ms",
                f"from the wake event: snapshot restored {_n(z['restored_ms'], 1)} ms, "
                f"recovered {_n(z['started_ms'], 1)} ms, step committed "
                f"{_n(wake['median'], 1)} ms (medians); hibernate p99 {_n(hib['p99'], 1)} ms; "
                f"stored as {z['stored_bytes'] / 1e6:,.2f} MB ({hb['mix']}); "
                f"{z['reps']} cycles" + (f"; target {', '.join(aims)}" if aims else ""),
            )
        )
    many = hb.get("many")
    if not many:
        return rows
    per = many["per_agent"]
    rows.append(
        (
            f"Disk per hibernated agent ({many['agents']:,} agents, "
            f"{_n(per['workspace_bytes'] / 1e3, 1)} kB workspace each)",
            f"{_n(per['disk_bytes'], 0)} bytes",
            f"database incl. WAL {_n(per['db_bytes'], 0)} + blobs {_n(per['blob_bytes'], 0)} "
            f"({_n(per['blob_allocated_bytes'], 0)} allocated on disk); its compressed "
            f"workspace + journal: {_n(per['snapshot_stored_bytes'], 0)} + "
            f"{_n(per['journal_bytes'], 0)} = {_n(per['reference_bytes'], 0)} "
            f"({_n(many['x_reference'], 1)}x); {_n(per['events'], 0)} events each",
        )
    )
    mem = many["memory"]
    if len(mem) == 2:
        lo, hi = mem
        w = "worker_pass"
        ratio = hi[w]["traced_peak_bytes"] / max(1, lo[w]["traced_peak_bytes"])
        rows.append(
            (
                "An idle worker pass (nothing to run) over hibernated agents",
                f"{_n(lo[w]['traced_peak_bytes'] / 1e3, 1)} kB peak at {lo['agents']:,}, "
                f"{_n(hi[w]['traced_peak_bytes'] / 1e3, 1)} kB at {hi['agents']:,} "
                f"({_n(ratio)}x)",
                f"tracemalloc peak of Worker(rt).run_until_idle(); RSS peak "
                f"+{_n(lo[w]['rss_peak_delta_bytes'] / 1e3, 0)} / "
                f"+{_n(hi[w]['rss_peak_delta_bytes'] / 1e3, 0)} kB; "
                f"{_n(lo[w]['ms'])} / {_n(hi[w]['ms'])} ms; store.agents_to_run(now) "
                f"{_n(lo['agents_to_run']['traced_peak_bytes'] / 1e3, 1)} / "
                f"{_n(hi['agents_to_run']['traced_peak_bytes'] / 1e3, 1)} kB, "
                f"{_n(lo['agents_to_run']['ms'])} / {_n(hi['agents_to_run']['ms'])} ms",
            )
        )
    return rows


BREAKDOWN_HEADERS = (
    "Store",
    "step",
    "COMMIT (WAL write + fsync)",
    "other SQL",
    "Python in _write (state JSON)",
    "store, outside _write",
    "outside the store",
    "commits/step",
)


def breakdown_rows(res: Mapping[str, Any]) -> list[tuple[str, ...]]:
    labelled = [("SQLite", res["steps"]["sqlite"]), ("memory", res["steps"]["memory"])]
    if "sqlite_large" in res["steps"]:
        large = res["steps"]["sqlite_large"]
        labelled.append((f"SQLite, {large['output_bytes']:,} B results", large))
    rows = []
    for label, x in labelled:
        sql = label != "memory"
        rows.append(
            (
                label,
                _n(x["wall_ms_per_step"]),
                _n(x["sql_commit_ms_per_step"]) if sql else "-",
                _n(x["sql_other_ms_per_step"]) if sql else "-",
                _n(x["write_python_ms_per_step"]),
                _n(x["store_other_ms_per_step"]),
                _n(x["other_ms_per_step"]),
                _n(x["commits_per_step"], 1),
            )
        )
    return rows


def resume_rows(res: Mapping[str, Any]) -> list[tuple[str, ...]]:
    return [
        (
            f"{(r['events'] - 2) // len(STEP_KINDS):,}",
            f"{r['events']:,}",
            _n(r["resume_ms"]),
            f"{_n(r['resume_ms_range'][0])} - {_n(r['resume_ms_range'][1])}",
            _n(r["open_ms"]),
            _n(r["run_ms"]),
            _n(r["load_ms"], 3),
            _n(r["process_ms"], 0),
            _n(r["bytes_per_event"], 0),
            f"{r['db_bytes'] / 1e6:,.1f}",
        )
        for r in res["resume"]["sizes"]
    ]


RESUME_HEADERS = (
    "History (steps)",
    "(events)",
    "Open + 1 step (ms)",
    "min - max (ms)",
    "open (ms)",
    "run (ms)",
    "of which load (ms)",
    "process (ms)",
    "DB bytes/event",
    "DB (MB)",
)


def machine_line(info: Mapping[str, Any]) -> str:
    cores = info["cores"]
    if info.get("usable_cores") not in (None, cores):
        cores = f"{info['usable_cores']} of {cores}"
    return (
        f"{info['cpu']}, {cores} cores; Python {info['python']}; SQLite {info['sqlite']}; "
        f"{info['os']}; databases on {info['filesystem']}"
    )


def show(res: Mapping[str, Any]) -> None:
    console = Console()
    if not console.is_terminal:  # piped or under make: do not wrap the tables at 80 columns
        console = Console(width=160)
    info = res["machine"]
    console.print()
    console.print(f"[bold]stead benchmarks[/bold], {info['date']} (git {info['git']})")
    console.print(machine_line(info))
    console.print(
        f"load average {info['loadavg_start']} at start, {info.get('loadavg_end')} at end; "
        f"the run took {res['duration_s']:.0f}s"
    )
    cmp, cfg = res["compare"], res["config"]
    t = Table(title="stead and its peers: medians over rounds")
    for i, h in enumerate(comparison.headers(cmp)):
        t.add_column(h, justify="left" if i == 0 else "right")
    for cells in comparison.rows(cmp, cfg):
        t.add_row(*cells)
    console.print(t)
    t = Table(title="Durability setting of each system (read back from a live connection)")
    for h in comparison.DURABILITY_HEADERS:
        t.add_column(h)
    for cells in comparison.durability_rows(cmp):
        t.add_row(*cells)
    console.print(t)
    if cmp["w3"]:
        t = Table(title="Resume in a fresh process, every system")
        for i, h in enumerate(comparison.W3_HEADERS):
            t.add_column(h, justify="left" if i in (0, 4) else "right")
        for cells in comparison.w3_detail_rows(cmp):
            t.add_row(*cells)
        console.print(t)
    for e in cmp["errors"]:
        console.print(f"[red]failed[/red]: {e['system']} {e['workload']}: {e['error']}")
    if res.get("curve"):
        t = Table(title="A step's cost against the conversation's length (medians per size)")
        for i, h in enumerate(curve.HEADERS):
            t.add_column(h, justify="left" if i < 2 else "right")
        for cells in curve.rows(res["curve"]):
            t.add_row(*cells)
        console.print(t)
    postgres_report.show(console, res.get("postgres"), cfg)
    console.print()
    console.print("[bold]stead in detail[/bold]")
    t = Table(title="Medians over rounds")
    for h in ("Workload", "Median", "Notes"):
        t.add_column(h)
    for row in summary_rows(res):
        t.add_row(*row)
    console.print(t)
    t = Table(title="Where a step's time goes (ms per step, averaged over each run)")
    for h in BREAKDOWN_HEADERS:
        t.add_column(h, justify="right")
    for row in breakdown_rows(res):
        t.add_row(*row)
    console.print(t)
    console.print(commit_sentence(res))
    t = Table(title="Resume: new Runtime on the same file, run ONE step (fresh process)")
    for h in RESUME_HEADERS:
        t.add_column(h, justify="right")
    for row in resume_rows(res):
        t.add_row(*row)
    console.print(t)
    r = res["resume"]
    if "ratio_largest_to_smallest" in r:
        sizes = r["sizes"]
        console.print(
            f"{sizes[-1]['events']:,} events vs {sizes[0]['events']:,}: "
            f"{r['ratio_largest_to_smallest']:.2f}x the resume time; "
            f"{_n(r['marginal_bytes_per_event'], 0)} bytes per added event"
        )


# -- files ----------------------------------------------------------------------


def commit_sentence(res: Mapping[str, Any]) -> str:
    s, f = res["steps"]["sqlite"], res["floor"]
    return (
        f"On SQLite a step spends {_n(s['sql_commit_ms_per_step'])} ms in COMMIT "
        f"({_n(s['ms_per_commit_statement'], 3)} ms per commit, against a floor of "
        f"{_n(f['median_ms'], 3)} ms for a whole transaction) and "
        f"{_n(s['wall_ms_per_step'] - s['sql_commit_ms_per_step'])} ms on everything else."
    )


def markdown(res: Mapping[str, Any]) -> str:
    info, cfg = res["machine"], res["config"]
    lines = [
        f"Measured {info['date']} at git {info['git']}, with `python -m bench"
        + (" " + " ".join(info["argv"]) if info["argv"] else "")
        + f"`; the run took {res['duration_s']:.0f} s.",
        "",
        f"Machine: {machine_line(info)}. Load average {info['loadavg_start']} at the start, "
        f"{info.get('loadavg_end')} at the end.",
        "",
    ]
    lines += comparison.markdown(res["compare"], cfg)
    lines += curve.markdown(res.get("curve"))
    lines += postgres_report.markdown(res.get("postgres"), cfg)
    lines += [
        "",
        "### stead in detail",
        "",
        "| Workload | Median | Notes |",
        "|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in summary_rows(res)]
    lines += [
        "",
        "Where a step's time goes (ms per step, averaged over each run, medians over rounds; "
        "for the memory store, the Python column is its own copying of the state):",
        "",
        "| " + " | ".join(BREAKDOWN_HEADERS) + " |",
        "|" + "---|" * len(BREAKDOWN_HEADERS),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in breakdown_rows(res)]
    lines += [
        "",
        commit_sentence(res),
        "",
        f"Resume: a fresh process opens a new `Runtime` on the same file and runs ONE step; "
        f"{cfg['resume_reps']} runs per size, alternating sizes.",
        "",
        "| " + " | ".join(RESUME_HEADERS) + " |",
        "|" + "---|" * len(RESUME_HEADERS),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in resume_rows(res)]
    r = res["resume"]
    if "ratio_largest_to_smallest" in r:
        sizes = r["sizes"]
        lines += [
            "",
            f"Resume at {sizes[-1]['events']:,} events takes "
            f"{r['ratio_largest_to_smallest']:.2f}x the time at {sizes[0]['events']:,}. "
            f"Each event added between {sizes[-2]['events']:,} and {sizes[-1]['events']:,} "
            f"took {_n(r['marginal_bytes_per_event'], 0)} bytes of database.",
        ]
    return "\n".join(lines) + "\n"


def write(res: Mapping[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (
        ("latest.json", json.dumps(res, indent=2, sort_keys=False) + "\n"),
        ("latest.md", markdown(res)),
    ):
        path = out / name
        tmp = out / f"{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        written.append(path)
    return written
