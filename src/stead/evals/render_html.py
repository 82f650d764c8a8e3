"""The eval's report as one HTML page: charts drawn as inline SVG, then the tables.

The page has no script and loads nothing: its style and charts are inline. Every
text that came from a suite, a spec or a model (ids, labels, decisions, errors)
is escaped where it is written, in the SVG too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from .render_md import COLUMNS, percent, row_cells, row_notes

_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;
max-width:1200px;padding:0 1em;color:#1d2330}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:2em;border-bottom:1px solid #ccd;
padding-bottom:.2em}p.lead{color:#445}
table{border-collapse:collapse;font-size:13px;margin:1em 0;width:100%}
th,td{border:1px solid #d5d8e0;padding:3px 5px;text-align:right}
td:first-child{white-space:nowrap}
th:first-child,td:first-child{text-align:left}th{background:#f1f3f7}
.fail{background:#fdecec;border:1px solid #e0a0a0;padding:.6em 1em;border-radius:6px}
.pass{background:#e9f7ee;border:1px solid #9fd3b0;padding:.6em 1em;border-radius:6px}
ul.notes{font-size:13px;color:#333}ul.notes code{white-space:pre-wrap;word-break:break-all}
.charts{display:flex;flex-wrap:wrap;gap:2em}figure{margin:0;max-width:100%}
figure svg{max-width:100%;height:auto}
figcaption{font-size:13px;color:#445;margin-top:.3em;max-width:520px}
"""
_COMPLETION, _ADHERENCE = "#2f6fde", "#1f9d57"
_DIVERGED, _DIFFERENT = "#e08a1e", "#c2412d"


def _t(value: Any) -> str:
    return escape(str(value), quote=True)


def bars(
    groups: Sequence[tuple[str, Sequence[float | None], str]],
    series: Sequence[tuple[str, str]],
    title: str,
) -> str:
    """A grouped bar chart of rates (0..1): per group, one bar per series side by side;
    a group with no values is drawn as ``n/a``; the third item of a group is a note
    written in red under its label (or empty)."""
    bar, gap, left, top, height = 36, 28, 56, 66, 200
    group_w = bar * len(series) + gap
    width = max(left + group_w * len(groups) + 20, 360)
    bottom = top + height
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{bottom + 72}" '
        f'viewBox="0 0 {width} {bottom + 72}" role="img" aria-label="{_t(title)}" '
        'font-family="system-ui,sans-serif">',
        f'<text x="{left}" y="18" font-size="15" font-weight="600">{_t(title)}</text>',
    ]
    x = left
    for name, color in series:  # the legend
        out.append(f'<rect x="{x}" y="30" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{x + 17}" y="41" font-size="12">{_t(name)}</text>')
        x += 17 + 8 * len(name) + 18
    for tick in (0, 25, 50, 75, 100):
        y = bottom - height * tick / 100
        out.append(
            f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ec"/>'
        )
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{tick}%</text>'
        )
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{bottom}" stroke="#8a90a0"/>')
    for i, (label, values, note) in enumerate(groups):
        x0 = left + gap / 2 + i * group_w
        middle = x0 + bar * len(series) / 2
        if all(v is None for v in values):
            out.append(
                f'<text x="{middle:.1f}" y="{bottom - 8}" font-size="12" '
                'text-anchor="middle" fill="#777">n/a</text>'
            )
        for j, value in enumerate(values):
            if value is None:
                continue
            h = max(height * value, 1.5)
            bx = x0 + j * bar
            out.append(
                f'<rect x="{bx + 2:.1f}" y="{bottom - h:.1f}" width="{bar - 4}" '
                f'height="{h:.1f}" fill="{series[j][1]}"/>'
            )
            out.append(
                f'<text x="{bx + bar / 2:.1f}" y="{bottom - h - 4:.1f}" font-size="10" '
                f'text-anchor="middle">{value:.0%}</text>'
            )
        shown = label if len(label) <= 14 else label[:13] + "…"
        out.append(
            f'<text x="{middle:.1f}" y="{bottom + 14}" font-size="12" '
            f'text-anchor="end" transform="rotate(-30 {middle:.1f} {bottom + 14})">'
            f"{_t(shown)}</text>"
        )
        if note:
            out.append(
                f'<text x="{middle:.1f}" y="{bottom + 66}" font-size="11" '
                f'text-anchor="middle" fill="{_DIFFERENT}">{_t(note)}</text>'
            )
    out.append("</svg>")
    return "".join(out)


def _charts(task: Mapping[str, Any]) -> str:
    kept, moved = [], []
    for r in task["conditions"]:
        label = str(r["condition"])
        if r["not_applicable"] or r["completion"] is None:
            kept.append((label, [None, None], ""))
            moved.append((label, [None, None], ""))
            continue
        kept.append((label, [r["completion"]["rate"], r["adherence"]["rate"]], ""))
        effects = r["effects"]
        note = ""
        if effects["repeated"] or effects["lost"]:
            note = f"{effects['repeated']} rep. / {effects['lost']} lost"
        same = r["same_outcome"]["rate"]
        moved.append((label, [r["divergence"]["rate"], None if same is None else 1 - same], note))
    first = bars(
        kept, [("completed", _COMPLETION), ("adhered", _ADHERENCE)], "Completion and adherence"
    )
    second = bars(
        moved,
        [("decisions diverged", _DIVERGED), ("outcome differs", _DIFFERENT)],
        "Difference from the baseline",
    )
    return (
        f'<div class="charts"><figure>{first}<figcaption>Share of runs completed (by '
        "certificate) and kept to their constraints, per condition.</figcaption></figure>"
        f"<figure>{second}<figcaption>Share of runs whose decisions or outcome differ from "
        "the baseline's; repeated or lost effects in red.</figcaption></figure></div>"
    )


def _code(text: str) -> str:
    return f"<code>{text[:400]}</code>"


def _notes(task: Mapping[str, Any]) -> str:
    items = [
        f"<b>{_t(r['condition'])}</b>: {note}"
        for r in task["conditions"]
        for note in row_notes(r, _t, _code)
    ]
    if not items:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _table(task: Mapping[str, Any]) -> str:
    head = "".join(f"<th>{_t(c)}</th>" for c in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{_t(v)}</td>" for v in row_cells(r)) + "</tr>"
        for r in task["conditions"]
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html(summary: Mapping[str, Any]) -> str:
    info = summary["info"]
    failures = summary.get("failures", [])
    if failures:
        check = (
            '<div class="fail"><b>Check failed</b><ul>'
            + "".join(f"<li>{_t(f)}</li>" for f in failures)
            + "</ul></div>"
        )
    else:
        check = (
            '<div class="pass"><b>Check passed</b>: no repeated or lost effect; every '
            "condition was injected and ended as its baseline did.</div>"
        )
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>stead eval: {_t(info.get('name', ''))}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Eval: {_t(info.get('name', ''))}</h1>",
        f'<p class="lead">Suite <code>{_t(info.get("suite", ""))}</code>: {_t(info.get("runs"))} '
        f"runs of each task under each condition, on {_t(info.get('store', ''))}. Completion is "
        "verified by the completion certificate; adherence is the share of runs with no "
        "violation, no forbidden call or changed file, and no call run on a lapsed grant.</p>",
        check,
    ]
    if info.get("skipped"):
        parts.append(f"<p>Not run (the budget was spent): {_t(', '.join(info['skipped']))}.</p>")
    for task in summary["tasks"]:
        parts += [f"<h2>Task {_t(task['task'])}</h2>", _charts(task), _table(task), _notes(task)]
    parts.append(
        f"<p class=lead>Medians over runs ({percent(None)} where nothing ran), with "
        "their range in brackets. report.json holds every figure.</p></body></html>"
    )
    return "\n".join(parts) + "\n"
