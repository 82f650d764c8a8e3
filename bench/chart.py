"""Draw bench/results/latest.png (or curve.png, the step-cost curve) from latest.json.

Usage: python -m bench.chart LATEST.json OUT.png (an OUT named curve*.png draws the curve)

Runs in ``.venv-peers`` (where matplotlib is installed, so stead's own venv
stays lean) and needs nothing but the standard library and matplotlib.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLOURS = {"stead": "#2a7f62", "langgraph": "#4a6fa5", "dbos": "#c0723a"}


def _bars(ax: Any, labels: list[str], values: list[float], colours: list[str], **kw: Any) -> None:
    bars = ax.bar(range(len(values)), values, color=colours, **kw)
    for b, v in zip(bars, values, strict=True):
        ax.annotate(
            f"{v:,.0f}",
            (b.get_x() + b.get_width() / 2, b.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(range(len(values)), labels, fontsize=8)


def draw(res: dict[str, Any], out: Path) -> None:
    cmp = res["compare"]
    labels = {s["name"]: s["label"] for s in cmp["systems"]}
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(16, 5))
    machine = res["machine"]
    fig.suptitle(
        f"stead and its peers, durable on SQLite (WAL, synchronous=FULL) - "
        f"{machine['cpu']}, {machine['cores']} cores, {machine['date'][:10]}, git {machine['git']}",
        fontsize=10,
    )

    # W1: steps per second, one agent; the peers' defaults hatched
    names, values, colours, hatches = [], [], [], []
    for name, s in cmp["w1"].items():
        names.append(labels[name])
        values.append(s["steps_per_s"])
        colours.append(COLOURS.get(name, "grey"))
        hatches.append("")
    for vname, s in cmp["w1_variants"].items():
        sysname = vname.split(":", 1)[0]
        setting = s["label"].split(", ", 1)[-1].replace(" (", "\n(")
        names.append(f"{labels[sysname]}\n{setting}")
        values.append(s["steps_per_s"])
        colours.append(COLOURS.get(sysname, "grey"))
        hatches.append("//")
    bars = a1.bar(range(len(values)), values, color=colours, alpha=0.9)
    for b, h, v in zip(bars, hatches, values, strict=True):
        b.set_hatch(h)
        if h:
            b.set_alpha(0.45)
        a1.annotate(
            f"{v:,.0f}",
            (b.get_x() + b.get_width() / 2, b.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    a1.set_xticks(range(len(values)), names, fontsize=7.5)
    floor_rate = 1e3 / cmp["floor_ms"]
    a1.axhline(floor_rate, color="black", linestyle="--", linewidth=0.8)
    a1.annotate(
        f"one durable commit: {floor_rate:,.0f}/s",
        (0, floor_rate),
        xytext=(0, 3),
        textcoords="offset points",
        fontsize=8,
    )
    steps = next(iter(cmp["w1"].values()))["steps"] if cmp["w1"] else 0
    a1.set_title(f"W1: durable steps/s, one agent ({steps:,} steps)", fontsize=10)
    a1.set_ylabel("steps per second (higher is better)")

    # W2: total steps per second, many agents
    names, values, colours = [], [], []
    for name, s in cmp["w2"].items():
        names.append(f"{labels[name]}\n{s['agents']:,} x {s['steps_per_agent']}")
        values.append(s["steps_per_s"])
        colours.append(COLOURS.get(name, "grey"))
    _bars(a2, names, values, colours)
    a2.set_title("W2: durable steps/s, many agents, one process", fontsize=10)
    a2.set_ylabel("steps per second (higher is better)")

    # W3: resume time against history length
    for name, rows in cmp["w3"].items():
        xs = [r["steps"] for r in rows]
        ys = [r["resume_ms"] for r in rows]
        a3.plot(xs, ys, marker="o", color=COLOURS.get(name, "grey"), label=labels[name])
        if name == "dbos":
            ys2 = [r["replay_ms"] + r["step_ms"] for r in rows if "replay_ms" in r]
            if len(ys2) == len(xs):
                a3.plot(
                    xs,
                    ys2,
                    marker=".",
                    linestyle=":",
                    color=COLOURS["dbos"],
                    label="DBOS without its queue's poll",
                )
    a3.set_xscale("log")
    a3.set_yscale("log")
    a3.set_xlabel("history length (agent steps)")
    a3.set_ylabel("ms from 'resume' to the next step done (lower is better)")
    a3.set_title("W3: resume in a fresh process vs history length", fontsize=10)
    a3.legend(fontsize=8)
    a3.grid(True, which="both", linewidth=0.3)

    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def draw_curve(res: dict[str, Any], out: Path) -> None:
    """curve.png: CPU (and wall) per step against the conversation's tokens, stead and
    LangGraph, one panel per tool result size."""
    cv = res["curve"]
    sizes = cv["result_bytes"]
    fig, axes = plt.subplots(1, len(sizes), figsize=(7 * len(sizes), 5), squeeze=False)
    machine = res["machine"]
    fig.suptitle(
        "A step's cost against the conversation's length: one agent, provider model over "
        f"local HTTP (zero latency), SQLite - {machine['cpu']}, {machine['cores']} cores, "
        f"{machine['date'][:10]}, git {machine['git']}",
        fontsize=10,
    )
    labels = {"stead": "stead", "langgraph": "LangGraph"}
    for ax, size in zip(axes[0], sizes, strict=True):
        for system, by_size in cv["curves"].items():
            c = by_size.get(str(size))
            if c is None:
                continue
            xs = [p["tokens"] for p in c["points"]]
            colour = COLOURS.get(system, "grey")
            label = labels.get(system, system)
            ys = [p["cpu_ms_per_step"] for p in c["points"]]
            ax.plot(xs, ys, marker="o", color=colour, label=f"{label}, CPU")
            for x, y in zip(xs, ys, strict=True):
                ax.annotate(f"{y:.1f}", (x, y), xytext=(0, 4), textcoords="offset points",
                            fontsize=7, ha="center", color=colour)  # fmt: skip
            ws = [p["wall_ms_per_step"] for p in c["points"]]
            ax.plot(xs, ws, linestyle=":", color=colour, label=f"{label}, wall")
        ax.set_xlabel("conversation (tokens, = request JSON bytes / 4)")
        ax.set_ylabel("ms per step (lower is better)")
        ax.set_title(f"{size:,}-byte tool results", fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(True, linewidth=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv: list[str]) -> int:
    src, out = Path(argv[0]), Path(argv[1])
    res = json.loads(src.read_text(encoding="utf-8"))
    if out.name.startswith("curve"):
        draw_curve(res, out)
    else:
        draw(res, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
