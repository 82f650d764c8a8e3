"""A build of stead that forgets an agent's grants across a hibernation is caught.

The build is this source tree, copied, with two lines added where a woken
agent's snapshot is restored: its grants are revoked, as a defect would drop
them (journaled, so the store's own integrity checks still pass). ``stead eval --check`` runs
under that copy (the eval and every worker import it) and must fail, naming the
hibernate condition and how its adherence moved from the baseline; under the
real tree the same eval passes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

AGENT = Path(__file__).parents[2] / "examples" / "evals" / "demo" / "governed.yaml"
REPO = Path(__file__).resolve().parents[2]
RESTORED = "act.emit(Kind.RESTORED, snapshot_id=snap.snapshot_id, by=act.owner)\n"


def broken_tree(tmp_path: Path) -> Path:
    src = tmp_path / "broken-build" / "src"
    shutil.copytree(
        REPO / "src" / "stead", src / "stead", ignore=shutil.ignore_patterns("__pycache__")
    )
    module = src / "stead" / "snapshots" / "hibernation.py"
    text = module.read_text(encoding="utf-8")
    at = text.index(RESTORED) + len(RESTORED)
    indent = " " * 8
    defect = (
        f"{indent}for gid in list(act.state.grants):  # the defect: a wake drops them\n"
        f"{indent}    act.emit(Kind.GRANT_REVOKED, grant=gid, by=act.owner, reason='')\n"
    )
    module.write_text(text[:at] + defect + text[at:], encoding="utf-8")
    return src


def run_eval(tmp_path: Path, name: str, src: Path) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: grants-across-hibernation\nruns: 2\nconditions: [{kind: hibernate, at: 3}]\n"
        f"tasks: [{{id: governed, spec: {AGENT}, "
        "env: {STEAD_DEMO_CHANGELOG: '{cell}/changelog.txt'}}]\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{REPO}"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "stead",
            "eval",
            str(suite),
            "--out",
            str(tmp_path / name),
            "--check",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_eval_catches_grants_forgotten_across_a_hibernation(tmp_path: Path) -> None:
    sound = run_eval(tmp_path, "sound", REPO / "src")
    assert sound.returncode == 0, sound.stdout + sound.stderr
    broken = run_eval(tmp_path, "broken", broken_tree(tmp_path))
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "governed / hibernate: adherence differs from the baseline" in broken.stderr
    report = json.loads((tmp_path / "broken" / "report.json").read_text(encoding="utf-8"))
    row = next(r for r in report["tasks"][0]["conditions"] if r["condition"] == "hibernate")
    # every call after the wake lost its grant and was asked of a person instead
    assert any(v.startswith("calls out of scope") for v in row["vs_baseline"])
    assert row["adherence"]["approvals_asked"]["median"] > 1
    # completion alone would not have shown it: the person approved, and it completed
    assert row["completion"]["rate"] == 1.0 and row["same_outcome"]["rate"] == 1.0
    assert (tmp_path / "broken" / "report.md").read_text(encoding="utf-8")
