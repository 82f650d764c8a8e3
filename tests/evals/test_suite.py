"""Reading a suite: what it may say, and the errors for what it may not."""

from __future__ import annotations

from pathlib import Path

import pytest

from stead.errors import SpecError
from stead.evals.suite import KINDS, load_suite

AGENT = Path(__file__).parents[2] / "examples" / "evals" / "demo" / "governed.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(text.replace("SPEC", str(AGENT)), encoding="utf-8")
    return path


def test_a_suite_with_no_conditions_runs_every_kind_after_its_baseline(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, "tasks: [{id: t, spec: SPEC}]"))
    assert [c.kind for c in suite.conditions] == list(KINDS)
    assert suite.conditions[0].label == "baseline"
    assert suite.runs == 3 and suite.tasks[0].approve == "all"


def test_conditions_labels_points_and_overrides(tmp_path: Path) -> None:
    text = """
name: mine
runs: 2
seed: 5
budget: {usd: 1.5, tokens: 1000}
conditions:
  - kill
  - {kind: kill, at: random, label: kill-random}
  - {kind: hibernate, at: 3}
  - {kind: model_swap, to: "scripted:other.yaml"}
  - {kind: grant_lapse, tool: format_code}
tasks:
  - id: t
    spec: SPEC
    message: start
    approve: [post_changelog]
    env: {STEAD_DEMO_CHANGELOG: "{cell}/log.txt"}
    expect: {never_call: [shell], unchanged: [README.md], max_spend_usd: 0.5, max_steps: 20}
"""
    suite = load_suite(write(tmp_path, text))
    labels = [(c.label, c.kind, c.at) for c in suite.conditions]
    assert labels == [
        ("baseline", "baseline", None),
        ("kill", "kill", None),
        ("kill-random", "kill", "random"),
        ("hibernate", "hibernate", 3),
        ("model_swap", "model_swap", None),
        ("grant_lapse", "grant_lapse", None),
    ]
    assert suite.condition("model_swap").to == f"scripted:{tmp_path / 'other.yaml'}"
    assert suite.condition("grant_lapse").tool == "format_code"
    task = suite.tasks[0]
    assert task.approves("post_changelog") and not task.approves("shell")
    assert task.expect.never_call == ("shell",) and task.expect.max_steps == 20
    assert (suite.budget_usd, suite.budget_tokens, suite.seed) == (1.5, 1000, 5)
    only = load_suite(write(tmp_path, text), runs=1, only=("hibernate",))
    assert [c.label for c in only.conditions] == ["baseline", "hibernate"] and only.runs == 1
    assert only.digest != suite.digest


def test_a_task_runs_under_the_conditions_it_names_and_its_baseline(tmp_path: Path) -> None:
    text = "conditions: [kill, move]\ntasks: [{id: t, spec: SPEC, conditions: [move]}]"
    task = load_suite(write(tmp_path, text)).tasks[0]
    suite = load_suite(write(tmp_path, text))
    assert [c.label for c in suite.conditions if task.runs_under(c)] == ["baseline", "move"]


def test_the_digest_follows_the_spec_the_suite_names(tmp_path: Path) -> None:
    spec = tmp_path / "agent" / "spec.yaml"
    spec.parent.mkdir()
    demo = AGENT.parents[3] / "src" / "stead" / "demo"
    text = (
        AGENT.read_text(encoding="utf-8")
        .replace("scripted:../../../src/stead/demo/", f"scripted:{demo}/")
        .replace("workspace: ../../../src/stead/demo/project\n", "")
    )
    assert str(demo) in text and "workspace:" not in text
    spec.write_text(text, encoding="utf-8")
    path = tmp_path / "suite.yaml"
    path.write_text("tasks: [{id: t, spec: agent/spec.yaml}]", encoding="utf-8")
    before = load_suite(path).digest
    spec.write_text(text.replace("max_steps: 50", "max_steps: 40"), encoding="utf-8")
    assert load_suite(path).digest != before


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("- just a list", "must be a YAML mapping"),
        ("tasks: []", "tasks must be a non-empty list"),
        ("tasks: [{id: t, spec: SPEC}]\nrunz: 3", "runz is not a field"),
        ("runs: 0\ntasks: [{id: t, spec: SPEC}]", "runs must be a whole number"),
        ("conditions: [reboot]\ntasks: [{id: t, spec: SPEC}]", "must be one of baseline"),
        ("conditions: [kill, kill]\ntasks: [{id: t, spec: SPEC}]", "used twice"),
        ("conditions: [{kind: kill, at: 0}]\ntasks: [{id: t, spec: SPEC}]", "at must be"),
        ("conditions: [{kind: kill, to: x}]\ntasks: [{id: t, spec: SPEC}]", "for model_swap only"),
        ("conditions: [{kind: kill, label: ../x}]\ntasks: [{id: t, spec: SPEC}]", "label must"),
        ("tasks: [{id: ../escape, spec: SPEC}]", "id must use letters"),
        ("tasks: [{id: t, spec: SPEC}, {id: t, spec: SPEC}]", "'t' is used twice"),
        ("tasks: [{id: t, spec: nowhere.yaml}]", "cannot read spec"),
        ("tasks: [{id: t, spec: SPEC, approve: some}]", "approve must be all, none"),
        ("tasks: [{id: t, spec: SPEC, env: {LD_PRELOAD: x}}]", "is not a name a suite may set"),
        ("tasks: [{id: t, spec: SPEC, env: {PYTHONPATH: x}}]", "is not a name a suite may set"),
        ("tasks: [{id: t, spec: SPEC, env: {STEAD_SECRET_KEY: x}}]", "not a name a suite"),
        ("tasks: [{id: t, spec: SPEC, expect: {never_call: shell}}]", "must be a list of names"),
        ("tasks: [{id: t, spec: SPEC, model: ''}]", "must be a model field"),
        ("budget: {dollars: 3}\ntasks: [{id: t, spec: SPEC}]", "dollars is not a field"),
        ("conditions: [kill]\ntasks: [{id: t, spec: SPEC, conditions: [move]}]", "'move', which"),
        ("tasks: [{id: t, spec: SPEC, conditions: kill}]", "must be a list of the suite's"),
    ],
)
def test_a_bad_suite_is_refused_naming_the_field(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(SpecError, match="suite") as caught:
        load_suite(write(tmp_path, text))
    assert says in str(caught.value)


def test_a_bad_spec_is_refused_with_the_task_and_the_spec_s_own_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel: scripted:none.yaml\n", encoding="utf-8")
    path = tmp_path / "suite.yaml"
    path.write_text("tasks: [{id: broken, spec: bad.yaml}]", encoding="utf-8")
    with pytest.raises(SpecError, match=r"tasks\[broken\]\.spec .*bad\.yaml.*model"):
        load_suite(path)
