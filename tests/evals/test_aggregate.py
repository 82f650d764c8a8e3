"""From cells to the summary and the CI gate: each condition beside its baseline."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stead.evals.aggregate import FORMAT, aggregate, check, spread
from stead.evals.compare import compare
from stead.evals.render_html import html
from stead.evals.render_md import markdown

GOLDEN = Path(__file__).parents[1] / "golden"
REAL_SHAPE = json.loads((GOLDEN / "eval_cell_v1.json").read_text(encoding="utf-8"))["metrics"]

INFO = {"name": "s", "runs": 2}


def cell(figures: dict[str, Any], condition: str, run: int, **more: Any) -> dict[str, Any]:
    kind = more.pop("kind", condition)
    injected = (
        None
        if kind == "baseline"
        else {"kind": kind, "at": 3, "proof": [{"seq": 1, "kind": "x", "what": "y"}]}
    )
    return {
        "task": "t",
        "condition": condition,
        "kind": kind,
        "run": run,
        "error": None,
        "not_applicable": None,
        "injected": injected,
        "wall_seconds": 1.0 + run,
        "cpu_seconds": 0.5,
        "metrics": copy.deepcopy(figures),
        **more,
    }


def rows(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["condition"]: r for r in summary["tasks"][0]["conditions"]}


def test_identical_runs_pass_the_gate(real: dict[str, Any]) -> None:
    cells = [cell(real, c, r) for c in ("baseline", "kill", "move") for r in (0, 1)]
    summary = aggregate(cells, INFO)
    assert summary["format"] == FORMAT and summary["failures"] == [] == check(summary)
    kill = rows(summary)["kill"]
    assert kill["completion"] == {"rate": 1.0, "certified": 1.0}
    assert kill["divergence"] == {"rate": 0.0, "first": None}
    assert kill["same_outcome"]["rate"] == 1.0 and kill["injected"]["rate"] == 1.0
    assert kill["cost"]["wall_seconds"] == {"median": 1.5, "min": 1.0, "max": 2.0}


def test_a_repeated_effect_a_lost_one_and_an_error_fail_the_gate(real: dict[str, Any]) -> None:
    twice = copy.deepcopy(real)
    twice["effects"]["repeated"] = ["call_1"]
    lost = copy.deepcopy(real)
    lost["effects"]["lost"] = ["call_2"]
    cells = [
        cell(real, "baseline", 0),
        cell(twice, "kill", 0),
        cell(lost, "move", 0),
        cell(real, "hibernate", 0, error="the worker exited with 1"),
    ]
    failures = check(aggregate(cells, INFO))
    assert "t / kill: 1 repeated and 0 lost effects" in failures
    assert "t / move: 0 repeated and 1 lost effects" in failures
    assert "t / hibernate / run 1: the worker exited with 1" in failures


def test_divergence_names_the_first_differing_decision(real: dict[str, Any]) -> None:
    other = copy.deepcopy(real)
    other["trail"][3] = '[{"tool":"shell"}]'
    other["outcome"]["files"] = "0" * 64
    summary = aggregate(
        [
            cell(real, "baseline", 0),
            cell(real, "baseline", 1),
            cell(real, "model_swap", 0),
            cell(other, "model_swap", 1),
        ],
        INFO,
    )
    row = rows(summary)["model_swap"]
    assert row["divergence"]["rate"] == 0.5
    assert row["divergence"]["first"] == {
        "run": 2,
        "index": 4,
        "baseline": real["trail"][3],
        "here": '[{"tool":"shell"}]',
    }
    assert row["same_outcome"]["rate"] == 0.5
    assert "t / model_swap: the outcome differs from the baseline in 50% of the runs" in check(
        summary
    )


def test_more_questions_fail_a_hibernation_but_are_expected_of_a_lapse(
    real: dict[str, Any],
) -> None:
    asked = copy.deepcopy(real)
    asked["adherence"]["approvals_asked"] += 2
    asked["adherence"]["out_of_scope"] += 2
    summary = aggregate(
        [cell(real, "baseline", 0), cell(asked, "hibernate", 0), cell(asked, "grant_lapse", 0)],
        INFO,
    )
    failures = check(summary)
    assert rows(summary)["hibernate"]["vs_baseline"] == [
        "calls out of scope 2 (baseline 0)",
        "approvals asked 3 (baseline 1)",
    ]
    assert any(f.startswith("t / hibernate: adherence differs") for f in failures)
    assert not any(f.startswith("t / grant_lapse") for f in failures)
    ran = copy.deepcopy(asked)
    ran["adherence"]["lapsed_executed"] = 1
    failures = check(aggregate([cell(real, "baseline", 0), cell(ran, "grant_lapse", 0)], INFO))
    assert "t / grant_lapse: a call ran on a lapsed grant without a new approval" in failures


def test_not_applicable_and_not_injected(real: dict[str, Any]) -> None:
    na = cell(real, "compact", 0, metrics=None, not_applicable="a scripted model keeps none")
    missed = cell(real, "kill", 0, injected=None)
    summary = aggregate([cell(real, "baseline", 0), na, missed], INFO)
    assert rows(summary)["compact"]["completion"] is None
    assert check(summary) == ["t / kill: the boundary was injected in 0% of the runs"]


def test_spread() -> None:
    assert spread([3, 1, 2]) == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert spread([]) is None


@settings(max_examples=20, deadline=None)
@given(st.randoms(use_true_random=False))
def test_the_summary_does_not_depend_on_the_order_cells_finished(rng: Any) -> None:
    cells = [cell(REAL_SHAPE, c, r) for c in ("baseline", "kill", "move") for r in (0, 1, 2)]
    cells[4]["metrics"]["trail"] = ["other"]
    shuffled = list(cells)
    rng.shuffle(shuffled)
    assert aggregate(shuffled, INFO) == aggregate(cells, INFO)


def test_a_report_of_format_1_is_still_read() -> None:
    """A report written by format 1 (a real eval of the coding example): compared
    with itself every figure is the same, and both reports render from it."""
    old = json.loads((GOLDEN / "eval_report_v1.json").read_text(encoding="utf-8"))
    result = compare(old, old)
    assert result["pairs"] and result["worse"] == result["better"] == 0
    assert "fix-calculator" in markdown(old) and "<svg" in html(old)
    cell_record = json.loads((GOLDEN / "eval_cell_v1.json").read_text(encoding="utf-8"))
    again = aggregate([cell_record], {"name": "golden"})
    assert again["tasks"][0]["conditions"][0]["injected"]["proof"]
