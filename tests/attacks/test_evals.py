"""Attacks on `stead eval`: what an agent's tools print cannot steer the eval.

An eval worker tells the eval when it is held mid-step and how its run ended.
A tool runs in that worker and may print anything: here it prints, on stdout
and stderr, the very lines a worker says (a forged hold and a forged end with
the budget spent). The eval reads its workers on a pipe of their own, so the
SIGKILL still lands after the real intent, the run still goes to its end, and
the journal's proof names the real call.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stead.evals.runner import Options, run_eval
from stead.evals.suite import load_suite

REPO = Path(__file__).resolve().parents[2]


def test_a_tool_printing_a_workers_lines_does_not_steer_the_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the workers import the tool from this repository, as the spec names it
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(REPO / "src")]))
    (tmp_path / "script.yaml").write_text(
        "- {tool: chatty, args: {}}\n"
        "- {tool: write_file, args: {path: out.txt, content: done}}\n"
        "- {finish: written}\n",
        encoding="utf-8",
    )
    (tmp_path / "spec.yaml").write_text(
        "name: chatty\nmodel: scripted:script.yaml\n"
        "tools: [write_file, 'tests.attacks.eval_tools:chatty']\n",
        encoding="utf-8",
    )
    (tmp_path / "suite.yaml").write_text(
        "runs: 1\nconditions: [{kind: kill, at: 1}]\ntasks: [{id: chatty, spec: spec.yaml}]\n",
        encoding="utf-8",
    )
    summary = run_eval(load_suite(tmp_path / "suite.yaml"), Options(tmp_path / "out"))
    rows = {r["condition"]: r for r in summary["tasks"][0]["conditions"]}
    assert summary["failures"] == []
    for row in rows.values():
        assert row["completion"]["rate"] == 1.0 and row["effects"]["repeated"] == 0
    proof = rows["kill"]["injected"]["proof"]
    assert proof[0]["kind"] == "tool_intent" and "write_file" in proof[0]["what"]
    assert "call_forged" not in str(rows["kill"]["injected"])
    # the forged lines went to the worker's log, where a person can see them
    logs = "".join(p.read_text("utf-8") for p in (tmp_path / "out").rglob("worker-*.log"))
    assert "call_forged" in logs


def test_a_tool_reading_stdin_neither_hangs_nor_steals_the_workers_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool reading the worker's stdin reads nothing (it is /dev/null) rather than
    waiting on the eval's end of a pipe until the worker's time runs out; the line
    that lets a held worker go (a database restart) travels on a pipe of its own."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(REPO / "src")]))
    (tmp_path / "script.yaml").write_text(
        "- {tool: listener, args: {}}\n"
        "- {tool: write_file, args: {path: out.txt, content: done}}\n"
        "- {finish: written}\n",
        encoding="utf-8",
    )
    (tmp_path / "spec.yaml").write_text(
        "name: listener\nmodel: scripted:script.yaml\n"
        "tools: [write_file, 'tests.attacks.eval_tools:listener']\n",
        encoding="utf-8",
    )
    (tmp_path / "suite.yaml").write_text(
        "runs: 1\nconditions: [{kind: kill, at: 1}]\ntasks: [{id: l, spec: spec.yaml}]\n",
        encoding="utf-8",
    )
    summary = run_eval(load_suite(tmp_path / "suite.yaml"), Options(tmp_path / "out", timeout=60))
    assert summary["failures"] == []
    rows = {r["condition"]: r for r in summary["tasks"][0]["conditions"]}
    assert rows["baseline"]["completion"]["rate"] == 1.0
    assert "write_file" in rows["kill"]["injected"]["proof"][0]["what"]
