"""The specs in examples/ are checked, and the offline one runs, as their README says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stead.cli.main import main

EXAMPLES = Path(__file__).parents[1] / "examples"
SPECS = sorted(EXAMPLES.glob("*/agent.yaml"))


def test_there_are_examples() -> None:
    assert len(SPECS) >= 3


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.parent.name)
def test_each_example_checks_clean(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "check", str(spec)]) == 0
    assert capsys.readouterr().out.strip() == f"{spec}: ok"


def test_the_offline_example_runs_to_completion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "offline"
    shutil.copytree(EXAMPLES / "offline", folder)
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    spec = str(folder / "agent.yaml")
    assert main(["--store", store, "run", spec, "--id", "ex", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "--json", "show", "ex"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "completed"
    assert [g["status"] for g in shown["goals"]] == ["completed"]
