"""The PostgreSQL section's tables, printed and in latest.md (see :mod:`bench.postgres_peers`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from . import comparison


def _n(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def rows(pg: Mapping[str, Any], config: Mapping[str, Any]) -> list[list[str]]:
    """The comparison table of the SQLite section, for PostgreSQL, then agents in flight."""
    cfg = {**config, "steps": config.get("steps")}
    out = comparison.rows(pg, cfg)
    for r in out:
        if r[0].startswith("Floor:"):
            r[0] = "Floor: one durable PostgreSQL commit, an autocommitted INSERT (ms)"
        elif r[0].startswith("W2 durable"):
            r[0] = "W2 durable steps/s, many agents in one process (ratio >1: stead faster)"
    systems = [s["name"] for s in pg["systems"]]
    peers = systems[1:]
    flight = pg.get("in_flight", {})
    if not flight:
        return out
    first = next(iter(flight.values()))
    what = (
        f"{first['steps_per_agent']} steps each, the model answering after "
        f"{config.get('inflight_latency', 1.0):g} s"
    )

    def row(label: str, cell: Any, better: str) -> None:
        cells = [cell(flight[n]) if n in flight else "-" for n in systems]
        ratios = []
        for p in peers:
            if "stead" in flight and p in flight:
                ratios.append(better(flight["stead"], flight[p]))
            else:
                ratios.append("-")
        out.append([label, *cells, *ratios])

    row(
        f"In flight: steps/s in all ({what}; ratio >1: stead faster)",
        lambda f: f"{_n(f['steps_per_s'], 1)} ({f['agents']:,} agents)",
        lambda s, p: f"{s['steps_per_s'] / p['steps_per_s']:.2f}x",
    )
    row(
        "In flight: added to a step beyond the model, p99 (p50), ms (ratio <1: stead less)",
        lambda f: f"{_n(f['added_ms_p99'])} ({_n(f['added_ms_p50'])})",
        lambda s, p: f"{s['added_ms_p99'] / p['added_ms_p99']:.2f}x",
    )
    if any("cpu_ms_per_step" in f for f in flight.values()):
        row(
            "In flight: the worker process's CPU per step, ms (ratio <1: stead less)",
            lambda f: _n(f["cpu_ms_per_step"], 2) if "cpu_ms_per_step" in f else "-",
            lambda s, p: (
                f"{s['cpu_ms_per_step'] / p['cpu_ms_per_step']:.2f}x"
                if "cpu_ms_per_step" in s and "cpu_ms_per_step" in p
                else "-"
            ),
        )
    row(
        "In flight: memory per agent, RSS growth / agents, kB (ratio <1: stead less)",
        lambda f: _n(f["kb_per_agent"]),
        lambda s, p: f"{s['kb_per_agent'] / p['kb_per_agent']:.2f}x",
    )
    return out


def durability_rows(pg: Mapping[str, Any]) -> list[list[str]]:
    out = []
    for s in pg["systems"]:
        info = pg["info"].get(s["name"])
        if info is None:
            continue
        used = info["used"]
        setting = (
            f"synchronous_commit={used['synchronous_commit']}, fsync={used['fsync']}, "
            f"wal_sync_method={used['wal_sync_method']}"
        )
        if "durability" in used:
            setting += f", durability={used['durability']}"
        vers = ", ".join(f"{k} {v}" for k, v in info.get("versions", {}).items())
        out.append([s["label"], vers or "this tree", setting, used["server_version"]])
    return out


DURABILITY_HEADERS = ["System", "Versions", "Read back from a live session", "Server"]
IN_FLIGHT_HEADERS = ["System", "Agents", "How", "steps/s", "p50 / p99 / max added (ms)",
                     "CPU/step (ms)", "RSS before -> peak (MiB)", "wall (s)"]  # fmt: skip


def in_flight_rows(pg: Mapping[str, Any]) -> list[list[str]]:
    labels = {s["name"]: s["label"] for s in pg["systems"]}
    out = []
    for name, f in pg.get("in_flight", {}).items():
        for r in f["rounds"]:
            out.append(
                [
                    labels[name],
                    f"{r['agents']:,} x {r['steps_per_agent']}",
                    r["how"],
                    _n(r["steps_per_s"], 1),
                    f"{_n(r['added_ms_p50'])} / {_n(r['added_ms_p99'])} / {_n(r['added_ms_max'])}",
                    _n(r["cpu_ms_per_step"], 2) if "cpu_ms_per_step" in r else "-",
                    f"{r['rss_base_kb'] / 1024:,.0f} -> {r['rss_peak_kb'] / 1024:,.0f}",
                    _n(r["wall_s"], 1),
                ]
            )
    return out


def _table(headers: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in body]
    return lines


def markdown(pg: Mapping[str, Any] | None, config: Mapping[str, Any]) -> list[str]:
    if pg is None:
        return []
    lines = ["", "### On PostgreSQL: stead and its peers, medians over rounds", ""]
    if pg.get("skipped"):
        return [*lines, f"**Not measured: {pg['skipped']}.**"]
    lines += [f"Server: {pg['server']}; every measurement in a schema of its own.", ""]
    lines += _table(comparison.headers(pg), rows(pg, config))
    lines += ["", "Durability setting of each system on PostgreSQL:", ""]
    lines += _table(DURABILITY_HEADERS, durability_rows(pg))
    if pg["w3"]:
        lines += ["", "Resume in a fresh process on PostgreSQL, every system:", ""]
        lines += _table(comparison.W3_HEADERS, comparison.w3_detail_rows(pg))
    if pg.get("in_flight"):
        lines += ["", "Agents in flight on PostgreSQL, every run:", ""]
        lines += _table(IN_FLIGHT_HEADERS, in_flight_rows(pg))
    if pg["errors"]:
        lines += ["", "Failed measurements on PostgreSQL:", ""]
        lines += [
            f"* {e['system']} {e['workload']}: {e['error'].splitlines()[0]}" for e in pg["errors"]
        ]
    return lines


def show(console: Console, pg: Mapping[str, Any] | None, config: Mapping[str, Any]) -> None:
    if pg is None:
        return
    if pg.get("skipped"):
        console.print(f"[bold red]PostgreSQL section not measured[/bold red]: {pg['skipped']}")
        return
    tables = [
        ("On PostgreSQL: stead and its peers, medians over rounds", comparison.headers(pg),
         rows(pg, config)),
        ("Durability setting of each system on PostgreSQL", DURABILITY_HEADERS,
         durability_rows(pg)),
        ("Resume in a fresh process on PostgreSQL", comparison.W3_HEADERS,
         comparison.w3_detail_rows(pg)),
        ("Agents in flight on PostgreSQL", IN_FLIGHT_HEADERS, in_flight_rows(pg)),
    ]  # fmt: skip
    for title, headers, body in tables:
        if not body:
            continue
        t = Table(title=title)
        for i, h in enumerate(headers):
            t.add_column(h, justify="left" if i == 0 else "right")
        for cells in body:
            t.add_row(*cells)
        console.print(t)
    for e in pg["errors"]:
        console.print(
            f"[red]failed on PostgreSQL[/red]: {e['system']} {e['workload']}: {e['error']}"
        )
