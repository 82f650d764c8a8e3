"""stead against its peers: medians, stead/peer ratios, the table and its Markdown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .stats import median
from .systems import Hist, System

W3_KEYS = (
    "resume_ms",
    "open_ms",
    "run_ms",
    "launch_ms",
    "until_workflow_starts_ms",
    "replay_ms",
    "step_ms",
    "process_ms",
    "cpu_ms",
)


def _summary(rs: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rs)}
    for k in keys:
        vals = [float(r[k]) for r in rs if r.get(k) is not None]
        if vals:
            out[k] = median(vals)
    rates = [r["steps_per_s"] for r in rs]
    out["steps_per_s_range"] = [min(rates), max(rates)]
    out["rounds"] = list(rs)
    return out


def summarise(
    systems: Sequence[System],
    infos: Mapping[str, Any],
    w1: Mapping[str, Sequence[dict[str, Any]]],
    variants: Mapping[str, Sequence[dict[str, Any]]],
    labels: Mapping[str, str],
    w2: Mapping[str, Sequence[dict[str, Any]]],
    histories: Mapping[str, Mapping[int, Hist]],
    resumes: Mapping[str, Mapping[int, Sequence[dict[str, Any]]]],
    w5: Mapping[str, Any],
    floor: Mapping[str, Any],
    errors: Sequence[dict[str, str]],
) -> dict[str, Any]:
    floor_ms = floor["median_ms"]
    w1_keys = (
        "steps_per_s",
        "ms_per_step",
        "p90_ms_per_step",
        "p99_ms_per_step",
        "wall_s",
        "wall_ms_per_step",
        "cpu_ms_per_step",
    )
    out_w1: dict[str, Any] = {}
    for name, rs in w1.items():
        if rs:
            s = _summary(rs, w1_keys)
            s["steps"] = rs[0]["steps"]
            s["x_floor"] = s["ms_per_step"] / floor_ms
            out_w1[name] = s
    out_var: dict[str, Any] = {}
    for vname, rs in variants.items():
        if rs:
            s = _summary(rs, w1_keys)
            s.update(label=labels[vname], steps=rs[0]["steps"], x_floor=s["ms_per_step"] / floor_ms)
            out_var[vname] = s
    out_w2: dict[str, Any] = {}
    for name, rs in w2.items():
        if rs:
            s = _summary(rs, ("steps_per_s", "wall_s", "wall_ms_per_step", "cpu_ms_per_step"))
            s.update(
                agents=rs[0]["agents"],
                steps_per_agent=rs[0]["steps_per_agent"],
                concurrency=rs[0].get("concurrency", ""),
            )
            out_w2[name] = s
    out_w3: dict[str, list[dict[str, Any]]] = {}
    for name, hs in histories.items():
        rows = []
        for size, h in sorted(hs.items()):
            rs = resumes.get(name, {}).get(size, [])
            if not rs:
                continue
            row: dict[str, Any] = {"steps": size, "n": len(rs)}
            for k in W3_KEYS:
                vals = [float(r[k]) for r in rs if r.get(k) is not None]
                if vals:
                    row[k] = median(vals)
            row["resume_ms_range"] = [
                min(r["resume_ms"] for r in rs),
                max(r["resume_ms"] for r in rs),
            ]
            row.update(
                build_s=h.build_s,
                db_bytes=h.db_bytes,
                bytes_per_step=h.db_bytes / size,
                runs=list(rs),
            )
            rows.append(row)
        if rows:
            out_w3[name] = rows

    ratios: dict[str, Any] = {"w1": {}, "w2": {}, "w3": {}}
    for s in systems:
        if s.name == "stead":
            continue
        if "stead" in out_w1 and s.name in out_w1:
            ratios["w1"][s.name] = out_w1["stead"]["steps_per_s"] / out_w1[s.name]["steps_per_s"]
        if "stead" in out_w2 and s.name in out_w2:
            ratios["w2"][s.name] = out_w2["stead"]["steps_per_s"] / out_w2[s.name]["steps_per_s"]
        stead_w3 = {r["steps"]: r["resume_ms"] for r in out_w3.get("stead", [])}
        peer_w3 = {r["steps"]: r["resume_ms"] for r in out_w3.get(s.name, [])}
        ratios["w3"][s.name] = {
            str(n): stead_w3[n] / peer_w3[n] for n in sorted(peer_w3) if n in stead_w3
        }
    return {
        "systems": [{"name": s.name, "label": s.label} for s in systems],
        "info": dict(infos),
        "floor_ms": floor_ms,
        "w1": out_w1,
        "w1_variants": out_var,
        "w2": out_w2,
        "w3": out_w3,
        "w5": dict(w5),
        "ratios": ratios,
        "errors": list(errors),
    }


# -- the table ---------------------------------------------------------------------


def _n(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def _ms(x: float) -> str:
    return _n(x, 2) if x < 10 else _n(x, 1) if x < 100 else _n(x, 0)


def headers(cmp: Mapping[str, Any]) -> list[str]:
    systems = cmp["systems"]
    return (
        ["Workload"]
        + [s["label"] for s in systems]
        + [f"stead / {s['label']}" for s in systems if s["name"] != "stead"]
    )


def rows(cmp: Mapping[str, Any], config: Mapping[str, Any]) -> list[list[str]]:
    """The comparison table: one row per figure, one column per system, then the ratios."""
    systems = [s["name"] for s in cmp["systems"]]
    peers = systems[1:]
    out: list[list[str]] = []

    def row(label: str, cell: Any, ratio: Any = None) -> None:
        cells = [cell(n) for n in systems]
        rs = [ratio(p) if ratio else "" for p in peers]
        out.append([label, *cells, *rs])

    def cpu_row(name: str, got: Mapping[str, Any]) -> None:
        """Processor time per step of the process that ran the steps, beside wall time."""
        if not any("cpu_ms_per_step" in got.get(n, {}) for n in systems):
            return
        row(
            f"{name} CPU per step, ms: the process's processor time / steps "
            "(wall ms/step in brackets; ratio <1: stead less)",
            lambda n: (
                f"{_ms(got[n]['cpu_ms_per_step'])} ({_ms(got[n]['wall_ms_per_step'])})"
                if "cpu_ms_per_step" in got.get(n, {})
                else "-"
            ),
            lambda p: (
                f"{got['stead']['cpu_ms_per_step'] / got[p]['cpu_ms_per_step']:.2f}x"
                if "cpu_ms_per_step" in got.get("stead", {}) and "cpu_ms_per_step" in got.get(p, {})
                else "-"
            ),
        )

    w1, w2, ratios = cmp["w1"], cmp["w2"], cmp["ratios"]
    row(
        "Floor: one durable SQLite commit (ms)",
        lambda n: _n(cmp["floor_ms"], 3) if n == "stead" else "",
    )
    steps = w1.get("stead", {}).get("steps", config.get("steps"))
    row(
        f"W1 durable steps/s, one agent, {steps:,} steps (ratio >1: stead faster)",
        lambda n: _n(w1[n]["steps_per_s"]) if n in w1 else "-",
        lambda p: f"{ratios['w1'][p]:.2f}x" if p in ratios["w1"] else "-",
    )
    row(
        "W1 ms per step, median (x the floor)",
        lambda n: f"{_ms(w1[n]['ms_per_step'])} ({w1[n]['x_floor']:.1f}x)" if n in w1 else "-",
    )
    cpu_row("W1", w1)
    for vname, v in cmp["w1_variants"].items():
        sysname = vname.split(":", 1)[0]
        row(
            f"W1 steps/s, {v['label']}, {v['steps']:,} steps (for information)",
            lambda n, v=v, sysname=sysname: _n(v["steps_per_s"]) if n == sysname else "",
            lambda p, v=v, sysname=sysname: (
                f"{w1['stead']['steps_per_s'] / v['steps_per_s']:.2f}x"
                if p == sysname and "stead" in w1
                else ""
            ),
        )
    row(
        "W2 durable steps/s, many agents in one process (ratio >1: stead faster)",
        lambda n: (
            f"{_n(w2[n]['steps_per_s'])} ({w2[n]['agents']:,} x {w2[n]['steps_per_agent']})"
            if n in w2
            else "-"
        ),
        lambda p: f"{ratios['w2'][p]:.2f}x" if p in ratios["w2"] else "-",
    )
    cpu_row("W2", w2)
    w3 = {n: {r["steps"]: r for r in rs} for n, rs in cmp["w3"].items()}
    sizes = sorted({size for rs in w3.values() for size in rs})
    for size in sizes:
        row(
            f"W3 resume + 1 step after {size:,} steps, ms (ratio <1: stead faster)",
            lambda n, size=size: _ms(w3[n][size]["resume_ms"]) if size in w3.get(n, {}) else "-",
            lambda p, size=size: (
                f"{ratios['w3'][p][str(size)]:.3f}x"
                if str(size) in ratios["w3"].get(p, {})
                else "-"
            ),
        )
    biggest = {n: max(rs) for n, rs in w3.items() if rs}
    row(
        "W3 storage per step at the longest history (bytes)",
        lambda n: (
            f"{_n(w3[n][biggest[n]]['bytes_per_step'])} (at {biggest[n]:,})"
            if n in biggest
            else "-"
        ),
    )
    long = cmp.get("long_resume")
    if long:
        # against each peer's resume at its longest W3 history, in the same run
        def vs_longest(p: str, which: str) -> str:
            if p not in biggest:
                return "-"
            theirs = w3[p][biggest[p]]["resume_ms"]
            return f"{long[which]['resume_ms'] / theirs:.3f}x (vs {biggest[p]:,})"

        what = "killed near its end" if long["killed"] else "ended"
        for which, label in (("first", "first resume"), ("second", "the resume after it")):
            row(
                f"W3 {label} + 1 step after ONE activation of {long['steps']:,} steps, "
                f"{what}, ms (CPU) (ratio: vs the peer's longest W3 history)",
                lambda n, which=which: (
                    f"{_ms(long[which]['resume_ms'])} ({_ms(long[which]['cpu_ms'])})"
                    if n == "stead"
                    else ""
                ),
                lambda p, which=which: vs_longest(p, which),
            )
    w5 = cmp["w5"]
    row(
        f"W5 crash recovery, {config.get('crash_agents', 100):,} agents (s)",
        lambda n: (
            _n(w5[n]["recovery_s"], 2)
            if n in w5
            else ("not measured yet" if n == "stead" else "not run")
        ),
    )
    return out


def durability_rows(cmp: Mapping[str, Any]) -> list[list[str]]:
    """Per system: versions, the SQLite setting used, and the system's own default."""
    out = []
    for s in cmp["systems"]:
        info = cmp["info"].get(s["name"])
        if info is None:
            continue
        used, default = info["used"], info["default"]

        def fmt(d: Mapping[str, Any]) -> str:
            text = f"{d['journal_mode']}, synchronous={d['synchronous']}"
            if "durability" in d:
                text += f", durability={d['durability']}"
            return text

        vers = info.get("versions", {})
        out.append(
            [
                s["label"],
                ", ".join(f"{k} {v}" for k, v in vers.items()) or "this tree",
                fmt(used),
                fmt(default),
            ]
        )
    return out


DURABILITY_HEADERS = ["System", "Versions", "Measured with", "Its default"]


def w3_detail_rows(cmp: Mapping[str, Any]) -> list[list[str]]:
    out = []
    labels = {s["name"]: s["label"] for s in cmp["systems"]}
    for name, rs in cmp["w3"].items():
        for r in rs:
            parts = []
            if "open_ms" in r:
                parts.append(f"open {_ms(r['open_ms'])}")
            if "run_ms" in r:
                parts.append(f"run {_ms(r['run_ms'])}")
            if "launch_ms" in r:
                parts.append(f"DBOS() + launch() {_ms(r['launch_ms'])}")
            if "until_workflow_starts_ms" in r:
                started = _ms(r["until_workflow_starts_ms"])
                parts.append(f"until the recovered workflow runs {started}")
            if "replay_ms" in r:
                parts.append(f"replay {_ms(r['replay_ms'])}")
            if "step_ms" in r:
                parts.append(f"new step {_ms(r['step_ms'])}")
            if "cpu_ms" in r:
                parts.append(f"CPU {_ms(r['cpu_ms'])}")
            out.append(
                [
                    labels[name],
                    f"{r['steps']:,}",
                    _ms(r["resume_ms"]),
                    f"{_ms(r['resume_ms_range'][0])} - {_ms(r['resume_ms_range'][1])}",
                    "; ".join(parts),
                    f"{r['db_bytes'] / 1e6:,.1f}",
                    _n(r["bytes_per_step"]),
                    f"{r['build_s']:.1f}",
                ]
            )
    return out


W3_HEADERS = [
    "System",
    "History (steps)",
    "Resume + 1 step (ms)",
    "min - max (ms)",
    "of which (ms, medians)",
    "DB (MB)",
    "bytes/step",
    "built in (s)",
]


def _table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in body]
    return lines


def markdown(cmp: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    lines = ["### stead and its peers, medians over rounds", ""]
    lines += _table(headers(cmp), rows(cmp, config))
    lines += ["", "Durability setting of each system (read back from a live connection):", ""]
    lines += _table(DURABILITY_HEADERS, durability_rows(cmp))
    if cmp["w3"]:
        lines += ["", "Resume in a fresh process, every system:", ""]
        lines += _table(W3_HEADERS, w3_detail_rows(cmp))
    if cmp["errors"]:
        lines += ["", "Failed measurements:", ""]
        lines += [
            f"* {e['system']} {e['workload']}: {e['error'].splitlines()[0]}" for e in cmp["errors"]
        ]
    return lines
