"""``stead eval`` on the command line: its exit codes, --check, --json, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stead.cli.main import main

AGENT = Path(__file__).parents[2] / "examples" / "evals" / "demo" / "governed.yaml"


def suite(tmp_path: Path, conditions: str = "[{kind: kill, at: 6}]") -> str:
    path = tmp_path / "suite.yaml"
    path.write_text(
        f"name: cli\nruns: 1\nconditions: {conditions}\n"
        f"tasks: [{{id: t, spec: {AGENT}, env: {{STEAD_DEMO_CHANGELOG: '{{cell}}/log.txt'}}}}]\n",
        encoding="utf-8",
    )
    return str(path)


def test_an_eval_that_passes_its_check_exits_0_and_says_where_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["eval", suite(tmp_path), "--out", str(out), "--check"]) == 0
    said = capsys.readouterr().out
    assert "1 tasks x 2 conditions x 1 runs = 2 cells" in said
    assert "t / kill / run 1: done" in said and f"wrote {out / 'report.html'}" in said
    assert "check: no repeated or lost effect" in said


def test_a_failed_check_exits_1_only_with_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a point past the end: the boundary is never injected, which --check fails on
    path = suite(tmp_path, "[{kind: kill, at: 40}]")
    assert main(["eval", path, "--out", str(tmp_path / "a")]) == 0
    assert "the boundary was injected in 0% of the runs" in capsys.readouterr().err
    assert main(["eval", path, "--out", str(tmp_path / "b"), "--check"]) == 1


def test_json_prints_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", suite(tmp_path), "--out", str(tmp_path / "o"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "stead-eval-report/1"
    assert [r["condition"] for r in report["tasks"][0]["conditions"]] == ["baseline", "kill"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["eval"], "stead eval needs a suite file"),
        (["eval", "nowhere.yaml"], "cannot read suite nowhere.yaml"),
        (["eval", "SUITE", "--runs", "0"], "--runs must be from 1 to 100"),
        (["eval", "SUITE", "--jobs", "0"], "--jobs must be from 1 to 64"),
        (["eval", "SUITE", "--timeout", "-1"], "--timeout must be"),
        (["eval", "SUITE", "--only", "reboot"], "no condition labelled 'reboot'"),
        (["eval", "SUITE", "extra.json"], "stead eval takes one suite"),
        (["eval", "compare", "a.json"], "stead eval compare takes two reports"),
    ],
)
def test_bad_usage_exits_2_saying_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    argv = [suite(tmp_path) if a == "SUITE" else a for a in argv]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert says in capsys.readouterr().err
