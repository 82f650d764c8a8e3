"""The example suites: they parse, their specs load, and the recorded coding agent's
eval passes its check offline (the demo suite's whole eval runs in CI: .ci/run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stead import Runtime
from stead.evals.runner import Options, run_eval
from stead.evals.suite import load_suite

EXAMPLES = Path(__file__).parents[2] / "examples" / "evals"


@pytest.mark.parametrize("name", ["demo", "coding"])
def test_an_example_suite_parses_and_its_agents_load(name: str) -> None:
    suite = load_suite(EXAMPLES / name / "suite.yaml")
    assert suite.tasks and suite.runs == 3
    for task in suite.tasks:
        Runtime.check_loads(task.spec)


def test_the_recorded_coding_agent_passes_its_eval_offline(tmp_path: Path) -> None:
    suite = load_suite(EXAMPLES / "coding" / "suite.yaml", runs=1)
    summary = run_eval(suite, Options(tmp_path / "out"))
    assert summary["failures"] == []
    rows = {r["condition"]: r for r in summary["tasks"][0]["conditions"]}
    assert rows["baseline"]["completion"]["certified"] == 1.0
    assert rows["baseline"]["cost"]["tokens"]["median"] > 0  # the recorded usage
    assert rows["kill"]["injected"]["proof"][0]["what"].endswith("(write_file) journaled")
