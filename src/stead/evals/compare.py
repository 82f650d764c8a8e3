"""Two eval reports side by side: two versions of an agent, or two models.

Each task and condition present in both is compared figure by figure, and each
difference is called better or worse: more completion, adherence and outcomes
like the baseline's is better; more repeated or lost effects, divergence and
cost is worse. Reports are read as files from outside: anything not of this
format, or not of its shape, is refused with what was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from .aggregate import FORMAT
from .render_md import cell_text

FIGURES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("completed", ("completion", "rate"), True),
    ("adhered", ("adherence", "rate"), True),
    ("same outcome", ("same_outcome", "rate"), True),
    ("diverged", ("divergence", "rate"), False),
    ("repeated", ("effects", "repeated"), False),
    ("lost", ("effects", "lost"), False),
    ("approvals asked", ("adherence", "approvals_asked", "median"), False),
    ("refused", ("adherence", "refused", "median"), False),
    ("tokens", ("cost", "tokens", "median"), False),
    ("spend", ("cost", "spend", "median"), False),
    ("steps", ("cost", "steps", "median"), False),
    ("wall s", ("cost", "wall_seconds", "median"), False),
)
"""Each figure compared: its name, where it is in a condition's row, and whether
more of it is better."""


def _refuse(which: str, problem: str) -> UsageError:
    return UsageError(f"report {which} {problem}; name a report.json written by stead eval")


def _rows(report: Any, which: str) -> dict[tuple[str, str], Mapping[str, Any]]:
    if not isinstance(report, Mapping) or report.get("format") != FORMAT:
        got = report.get("format") if isinstance(report, Mapping) else type(report).__name__
        raise _refuse(which, f"is not a stead eval report (format {got!r}, not {FORMAT!r})")
    if not isinstance(report.get("info", {}), Mapping):
        raise _refuse(which, "has an info that is not a mapping")
    tasks = report.get("tasks")
    if not isinstance(tasks, list):
        raise _refuse(which, "has no list of tasks")
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for t in tasks:
        if not isinstance(t, Mapping) or not isinstance(t.get("conditions"), list):
            raise _refuse(which, "has a task without a list of conditions")
        for r in t["conditions"]:
            if not isinstance(r, Mapping) or not isinstance(r.get("condition"), str):
                raise _refuse(
                    which, f"has a condition of task {str(t.get('task'))[:40]!r} without a label"
                )
            out[(str(t.get("task")), r["condition"])] = r
    return out


def _figure(row: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = row
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def compare(a: Any, b: Any) -> dict[str, Any]:
    """Every task and condition of ``a`` and ``b``, figure by figure (see the module)."""
    rows_a, rows_b = _rows(a, "A"), _rows(b, "B")
    pairs: list[dict[str, Any]] = []
    verdicts: list[str] = []
    for key in [k for k in rows_a if k in rows_b]:
        figures: list[dict[str, Any]] = []
        for name, path, more_is_better in FIGURES:
            x, y = _figure(rows_a[key], path), _figure(rows_b[key], path)
            if x is None or y is None:
                verdict = "n/a"
            elif x == y:
                verdict = "same"
            else:
                verdict = "better" if (y > x) == more_is_better else "worse"
            figures.append({"figure": name, "a": x, "b": y, "verdict": verdict})
            verdicts.append(verdict)
        pairs.append({"task": key[0], "condition": key[1], "figures": figures})
    return {
        "format": "stead-eval-comparison/1",
        "a": str((a.get("info") or {}).get("name", "")),
        "b": str((b.get("info") or {}).get("name", "")),
        "pairs": pairs,
        "only_a": [f"{t} / {c}" for t, c in rows_a if (t, c) not in rows_b],
        "only_b": [f"{t} / {c}" for t, c in rows_b if (t, c) not in rows_a],
        "worse": verdicts.count("worse"),
        "better": verdicts.count("better"),
    }


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def compare_markdown(result: Mapping[str, Any]) -> str:
    out = [
        f"# Comparison: A {cell_text(result['a'])} and B {cell_text(result['b'])}",
        "",
        f"{result['better']} figures better in B, {result['worse']} worse.",
        "",
    ]
    for p in result["pairs"]:
        changed = [f for f in p["figures"] if f["verdict"] in ("better", "worse")]
        title = f"## {cell_text(p['task'])} / {cell_text(p['condition'])}"
        if not changed:
            out += [title, "", "No figure differs.", ""]
            continue
        out += [title, "", "| figure | A | B | B is |", "|---|---|---|---|"]
        out += [
            f"| {f['figure']} | {_shown(f['a'])} | {_shown(f['b'])} | {f['verdict']} |"
            for f in changed
        ]
        out.append("")
    for side in ("only_a", "only_b"):
        if result[side]:
            out.append(f"Only in {side[-1].upper()}: {cell_text(', '.join(result[side]))}")
    return "\n".join(out) + "\n"
