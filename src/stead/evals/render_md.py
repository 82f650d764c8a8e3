"""The eval's report as Markdown: a table per task, then what differs and what failed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def cell_text(value: Any) -> str:
    """A text from a suite or a model, safe inside a Markdown table cell."""
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")


def percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0%}"


def figure(s: Mapping[str, float] | None, digits: int | None = None) -> str:
    """A median, with the range when the runs differ (counts as they are, other
    figures to ``digits`` places)."""
    if not s:
        return "-"
    shown = "{:g}" if digits is None else f"{{:.{digits}f}}"
    median, low, high = (shown.format(s[k]) for k in ("median", "min", "max"))
    return median if low == high else f"{median} ({low} to {high})"


COLUMNS = (
    "condition",
    "injected",
    "completed",
    "adhered",
    "asked",
    "refused",
    "lapsed",
    "repeated",
    "lost",
    "diverged",
    "same outcome",
    "tokens",
    "spend $",
    "steps",
    "wall s",
    "cpu s",
)


def row_cells(r: Mapping[str, Any]) -> list[str]:
    """One condition's figures, in the order of :data:`COLUMNS`."""
    name = cell_text(r["condition"])
    if r["not_applicable"]:
        return [name, "n/a", *["-"] * (len(COLUMNS) - 2)]
    if r["completion"] is None:
        return [name, "error", *["-"] * (len(COLUMNS) - 2)]
    a, cost = r["adherence"], r["cost"]
    injected = "baseline" if r["kind"] == "baseline" else percent(r["injected"]["rate"])
    lapsed = f"{figure(a['lapsed_attempts'])}/{figure(a['lapsed_executed'])}"
    return [
        name,
        injected,
        percent(r["completion"]["rate"]),
        percent(a["rate"]),
        figure(a["approvals_asked"]),
        figure(a["refused"]),
        lapsed,
        str(r["effects"]["repeated"]),
        str(r["effects"]["lost"]),
        percent(r["divergence"]["rate"]),
        percent(r["same_outcome"]["rate"]),
        figure(cost["tokens"]),
        figure(cost["spend"], 4),
        figure(cost["steps"]),
        figure(cost["wall_seconds"], 1),
        figure(cost["cpu_seconds"], 1),
    ]


def _code(text: str) -> str:
    return f"`{text[:200]}`"


def row_notes(
    r: Mapping[str, Any], shown: Callable[[Any], str], code: Callable[[str], str]
) -> list[str]:
    """What a condition's row cannot hold, one line each, every text from outside
    passed through ``shown`` (the report's escaping) and decisions through ``code``."""
    notes = []
    if r["not_applicable"]:
        notes.append(f"not applicable: {shown(r['not_applicable'])}")
    notes += [shown(line) for line in r.get("vs_baseline", [])]
    effects = r.get("effects") or {}
    if effects.get("unknown"):
        notes.append(
            f"{effects['unknown']} calls left with an unknown outcome, "
            f"{effects.get('retried', 0)} retried by the person"
        )
    first = (r.get("divergence") or {}).get("first")
    if first:
        notes.append(
            f"run {shown(first['run'])} first differs at decision "
            f"{shown(first['index'])}: baseline {code(shown(first['baseline']))}, "
            f"here {code(shown(first['here']))}"
        )
    notes += [shown(e) for e in r["errors"]]
    proof = (r.get("injected") or {}).get("proof") or []
    if proof:
        parts = [f"#{shown(p['seq'])} {shown(p['kind'])} ({shown(p['what'])})" for p in proof]
        notes.append("the journal shows it: " + "; ".join(parts))
    return notes


def markdown(summary: Mapping[str, Any]) -> str:
    info = summary["info"]
    out = [f"# Eval: {cell_text(info.get('name', ''))}", ""]
    out.append(
        f"Suite `{cell_text(info.get('suite', ''))}`, {info.get('runs')} runs of each "
        f"task under each condition, on {cell_text(info.get('store', ''))}."
    )
    out += [
        "",
        "Completed is verified by the completion certificate; adhered is the share of "
        "runs with no violation, no forbidden call or changed file, and no call run on a "
        "lapsed grant; lapsed is calls made after the grant covering them lapsed / those "
        "of them run without a new approval; "
        "diverged and same outcome compare each run with the baseline's run of the same "
        "number. Figures are medians over the runs, with their range.",
        "",
    ]
    if info.get("skipped"):
        out += [f"Not run (the budget was spent): {cell_text(', '.join(info['skipped']))}.", ""]
    for t in summary["tasks"]:
        out += [f"## Task {cell_text(t['task'])}", ""]
        out.append("| " + " | ".join(COLUMNS) + " |")
        out.append("|" + "---|" * len(COLUMNS))
        notes: list[str] = []
        for r in t["conditions"]:
            out.append("| " + " | ".join(row_cells(r)) + " |")
            where = cell_text(r["condition"])
            notes += [f"- {where}: {n}" for n in row_notes(r, cell_text, _code)]
        if notes:
            out += ["", *notes]
        out.append("")
    out.append("## Check")
    out.append("")
    failures = summary.get("failures", [])
    if failures:
        out += [f"- {cell_text(f)}" for f in failures]
    else:
        out.append(
            "Passed: no repeated or lost effect; every condition was injected and ended "
            "as its baseline did."
        )
    return "\n".join(out) + "\n"
