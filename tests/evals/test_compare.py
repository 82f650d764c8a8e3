"""Comparing two reports: each figure better, worse or the same; hostile files refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from stead.cli.main import main
from stead.errors import UsageError
from stead.evals.aggregate import aggregate
from stead.evals.compare import compare, compare_markdown

from .test_aggregate import cell


def report(real: dict[str, Any], name: str, **change: Any) -> dict[str, Any]:
    figures = copy.deepcopy(real)
    for key, value in change.items():
        group, _, field = key.partition("__")
        figures[group][field] = value
    cells = [cell(real, "baseline", 0), cell(figures, "kill", 0)]
    if name == "B":
        cells.append(cell(real, "move", 0))
    return aggregate(cells, {"name": name})


def test_a_version_that_repeats_an_effect_and_costs_more_is_worse(real: dict[str, Any]) -> None:
    a = report(real, "A")
    b = report(real, "B", effects__repeated=["call_1"], cost__tokens=real["cost"]["tokens"] + 500)
    result = compare(a, b)
    kill = next(p for p in result["pairs"] if p["condition"] == "kill")
    verdicts = {f["figure"]: f["verdict"] for f in kill["figures"]}
    assert verdicts["repeated"] == "worse" and verdicts["tokens"] == "worse"
    assert verdicts["completed"] == "same" and verdicts["adhered"] == "same"
    assert result["only_b"] == ["t / move"] and result["only_a"] == []
    assert result["worse"] == 2 and result["better"] == 0
    text = compare_markdown(result)
    assert "| repeated | 0 | 1 | worse |" in text and "Only in B: t / move" in text


def test_fewer_approvals_asked_is_better(real: dict[str, Any]) -> None:
    a = report(real, "A", adherence__approvals_asked=3)
    b = report(real, "B")
    kill = next(p for p in compare(a, b)["pairs"] if p["condition"] == "kill")
    assert {f["figure"]: f["verdict"] for f in kill["figures"]}["approvals asked"] == "better"


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ([1, 2], "is not a stead eval report"),
        ({"format": "something-else/1"}, "format 'something-else/1'"),
        ({"format": "stead-eval-report/1"}, "has no list of tasks"),
        ({"format": "stead-eval-report/1", "info": "zzz", "tasks": []}, "info that is not"),
        ({"format": "stead-eval-report/1", "tasks": [{"task": "t"}]}, "without a list"),
        (
            {"format": "stead-eval-report/1", "tasks": [{"task": "t", "conditions": [7]}]},
            "without a label",
        ),
    ],
)
def test_a_file_that_is_not_a_report_is_refused(real: dict[str, Any], bad: Any, says: str) -> None:
    with pytest.raises(UsageError, match="report B") as caught:
        compare(report(real, "A"), bad)
    assert says in str(caught.value)


def test_stead_eval_compare_on_the_command_line(
    tmp_path: Path, real: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "report.json").write_text(json.dumps(report(real, "A")), "utf-8")
    (tmp_path / "b.json").write_text(json.dumps(report(real, "B", effects__lost=["c"])), "utf-8")
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b.json")]) == 0
    assert "| lost | 0 | 1 | worse |" in capsys.readouterr().out
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["worse"] == 1
    (tmp_path / "junk.json").write_text("{" * 100_000, "utf-8")
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "junk.json")]) == 2
    assert "is not JSON" in capsys.readouterr().err
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "none.json")]) == 2
    assert "cannot read the report" in capsys.readouterr().err
    # figures of the wrong types deep inside are compared as missing, never a traceback
    odd = {
        "format": "stead-eval-report/1",
        "info": {},
        "tasks": [
            {
                "task": {"a": 1},
                "conditions": [
                    {
                        "condition": "kill",
                        "completion": "x",
                        "adherence": [1],
                        "effects": {"repeated": "a"},
                        "cost": {"tokens": {"median": None}},
                    }
                ],
            }
        ],
    }
    (tmp_path / "odd.json").write_text(json.dumps(odd), "utf-8")
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "odd.json")]) == 0
    assert "Only in A: t / baseline, t / kill" in capsys.readouterr().out


def test_two_versions_of_an_agent_compared_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The governed demo, then a version of it whose script skips the formatter: the
    comparison says what got worse (its goal fails), as an eval of each shows it."""
    examples = Path(__file__).parents[2] / "examples" / "evals" / "demo"
    script = (examples.parents[2] / "src" / "stead" / "demo" / "script.yaml").read_text("utf-8")
    skipped = script.replace("- {tool: format_code, args: {path: shop/report.py}}\n", "")
    assert skipped != script
    (tmp_path / "v2.yaml").write_text(skipped, encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"runs: 1\nconditions: [kill]\ntasks: [{{id: governed, spec: {examples / 'governed.yaml'},"
        " env: {STEAD_DEMO_CHANGELOG: '{cell}/changelog.txt'}}]\n",
        encoding="utf-8",
    )
    assert main(["eval", str(suite), "--out", str(tmp_path / "a")]) == 0
    v2 = f"scripted:{tmp_path / 'v2.yaml'}"
    assert main(["eval", str(suite), "--out", str(tmp_path / "b"), "--model", v2]) == 0
    capsys.readouterr()
    assert main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    base = next(p for p in result["pairs"] if p["condition"] == "baseline")
    verdicts = {f["figure"]: f["verdict"] for f in base["figures"]}
    assert verdicts["completed"] == "worse"  # calc_total is left in report.py
