"""The whole eval: its folder, resuming it after it is killed, refusing a changed suite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stead.errors import UsageError
from stead.evals.runner import Options, run_eval
from stead.evals.suite import load_suite

AGENT = Path(__file__).parents[2] / "examples" / "evals" / "demo" / "governed.yaml"
REPO = Path(__file__).resolve().parents[2]


def write_suite(tmp_path: Path, runs: int = 2, conditions: str = "[kill, move]") -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(
        f"name: resumable\nruns: {runs}\nconditions: {conditions}\n"
        f"tasks: [{{id: t, spec: {AGENT}, env: {{STEAD_DEMO_CHANGELOG: '{{cell}}/log.txt'}}}}]\n",
        encoding="utf-8",
    )
    return path


def cells(out: Path) -> dict[str, dict[str, object]]:
    return {
        str(p.parent.relative_to(out / "cells")): json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((out / "cells").glob("*/*/*/cell.json"))
    }


def test_an_eval_writes_every_cell_and_the_reports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = run_eval(load_suite(write_suite(tmp_path)), Options(out))
    found = cells(out)
    assert sorted(found) == [f"t/{c}/{r}" for c in ("baseline", "kill", "move") for r in (0, 1)]
    assert all(c["error"] is None for c in found.values())
    # the default point is the middle decision of the baseline run
    decisions = found["t/baseline/0"]["metrics"]["cost"]["decisions"]  # type: ignore[index]
    assert found["t/move/0"]["at"] == decisions // 2
    for name in ("report.json", "report.md", "report.html", "eval.json", "vault.key"):
        assert (out / name).exists(), name
    assert json.loads((out / "report.json").read_text(encoding="utf-8")) == summary
    assert oct((out / "vault.key").stat().st_mode & 0o777) == "0o600"


def test_a_killed_eval_resumes_keeping_the_cells_it_finished(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, runs=3, conditions="[kill, hibernate, move, model_swap]")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"}
    command = [sys.executable, "-m", "stead", "eval", str(suite), "--out", str(out), "--jobs", "1"]
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(cells(out)) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the eval ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the eval and its workers, mid-cell
    proc.wait()
    before = cells(out)
    assert 4 <= len(before) < 15, "the eval was to be killed part-way"
    assert not (out / "report.json").exists()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    after = cells(out)
    assert len(after) == 15
    for key, record in before.items():  # kept, not run again
        assert after[key]["agent_id"] == record["agent_id"]
    assert all(c["error"] is None for c in after.values())
    assert (out / "report.html").exists()


def test_a_changed_suite_is_refused_on_the_same_folder_unless_fresh(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_eval(load_suite(write_suite(tmp_path, runs=1, conditions="[model_swap]")), Options(out))
    changed = load_suite(write_suite(tmp_path, runs=1, conditions="[move]"))
    with pytest.raises(UsageError, match="another suite, or of this suite before it changed"):
        run_eval(changed, Options(out))
    run_eval(changed, Options(out, fresh=True))
    assert sorted(cells(out)) == ["t/baseline/0", "t/move/0"]


def test_a_folder_that_is_not_an_eval_is_never_emptied(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "precious.txt").write_text("keep", encoding="utf-8")
    with pytest.raises(UsageError, match="not empty and holds no stead eval"):
        run_eval(load_suite(write_suite(tmp_path, runs=1)), Options(out, fresh=True))
    assert (out / "precious.txt").read_text(encoding="utf-8") == "keep"


def test_a_budget_spent_starts_no_more_cells(tmp_path: Path) -> None:
    path = write_suite(tmp_path, runs=1, conditions="[move]")
    path.write_text(path.read_text(encoding="utf-8") + "budget: {tokens: 1}\n", encoding="utf-8")
    # a scripted model spends nothing: the budget is never reached and every cell runs
    summary = run_eval(load_suite(path), Options(tmp_path / "out"))
    assert len(cells(tmp_path / "out")) == 2
    assert summary is not None


def test_fresh_through_a_link_removes_nothing_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "real"
    run_eval(load_suite(write_suite(tmp_path, runs=1, conditions="[model_swap]")), Options(out))
    link = tmp_path / "link"
    link.symlink_to(out)
    again = load_suite(write_suite(tmp_path, runs=1, conditions="[model_swap]"))
    with pytest.raises(UsageError, match=r"cannot start .* afresh"):
        run_eval(again, Options(link, fresh=True))
    assert (out / "eval.json").exists() and (out / "report.json").exists()
