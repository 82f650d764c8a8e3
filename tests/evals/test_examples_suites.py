"""What the example suites (examples/evals/) rely on, beyond parsing: the recorded
coding agent replays from the journal's count of requests after a restart, using
every recorded exchange once; the governed demo's grant lapse falls before a call
of the lapsed tool; and every condition a task runs under is one it can take."""

from __future__ import annotations

import json
import secrets
from dataclasses import replace
from pathlib import Path

from stead.errors import SpecError
from stead.evals.suite import Suite, load_suite
from stead.runtime.runtime import Runtime
from stead.spec import AgentSpec
from stead.store.sqlite import SqliteStore
from stead.yamlsafe import load_yaml, read_text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "evals"


def runtime(tmp_path: Path, key: bytes) -> Runtime:
    return Runtime(SqliteStore(tmp_path / "stead.db"), tmp_path / "data", secret_key=key)


def suite(name: str) -> Suite:
    return load_suite(EXAMPLES / name / "suite.yaml")


def test_the_coding_recording_replays_to_completion_across_a_restart(tmp_path: Path) -> None:
    (task,) = suite("coding").tasks
    recording = Path(task.spec.model.partition(":")[2])
    assert task.spec.model.startswith("replay:") and recording.is_file()
    lines = recording.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "stead-model-recording/1"
    key = secrets.token_bytes(32)
    rt = runtime(tmp_path, key)
    try:
        agent = rt.create(task.spec).agent_id
        first = rt.run(agent, max_steps=3)
        assert first.state.decisions == 3 and not first.state.is_final
        assert first.state.model_requests == 3
    finally:
        rt.close()
    # another runtime on the same store, as a new worker would be: the replay goes on
    # from the fourth exchange, counted from the journal, not from the first
    rt = runtime(tmp_path, key)
    try:
        state = rt.run(agent).state
        assert state.status == "completed", state.status_reason
        # every recorded exchange answered exactly one request: none left over
        assert state.model_requests == len(lines) - 1
    finally:
        rt.close()


def test_a_changed_request_stops_the_replay_naming_what_differs(tmp_path: Path) -> None:
    (task,) = suite("coding").tasks
    spec = replace(task.spec, instructions=task.spec.instructions + " Be quick.")
    rt = runtime(tmp_path, secrets.token_bytes(32))
    try:
        state = rt.run(rt.create(spec).agent_id).state
        assert state.status == "needs_attention"
        assert "request 1 differs from the recording" in state.status_reason
        assert state.decisions == 0
    finally:
        rt.close()


def scripted_calls(spec: AgentSpec) -> list[str | None]:
    """The tool (or None) of each decision of a scripted spec's script, in order."""
    path = Path(spec.base_dir or ".") / spec.model.partition(":")[2]
    script = load_yaml(read_text(path, "script", SpecError), f"script {path}", SpecError)
    assert isinstance(script, list)
    return [step.get("tool") for step in script]


def test_the_governed_demo_calls_the_lapsed_tool_after_the_lapse_and_is_asked() -> None:
    demo = suite("demo")
    lapse = next(c for c in demo.conditions if c.kind == "grant_lapse")
    (task,) = [t for t in demo.tasks if t.runs_under(lapse)]
    assert isinstance(lapse.at, int) and lapse.tool is not None
    # a lapse after the last call of its tool would prove nothing
    assert lapse.tool in scripted_calls(task.spec)[lapse.at :]
    assert any(g["tool"] == lapse.tool for g in task.spec.scope or [])
    # asked of the person, who approves: the outcome stays the baseline's
    assert task.spec.out_of_scope == "ask" and task.approve == "all"


def test_each_task_hibernated_waits_for_a_person_after_its_point() -> None:
    demo = suite("demo")
    hibernate = next(c for c in demo.conditions if c.kind == "hibernate")
    tasks = [t for t in demo.tasks if t.runs_under(hibernate)]
    assert tasks
    for task in tasks:
        calls = scripted_calls(task.spec)
        point = hibernate.at if isinstance(hibernate.at, int) else len(calls) // 2
        waits = [
            tool
            for tool in calls[point:]
            if tool is not None and task.spec.tool_autonomy.get(tool) == "act_with_approval"
        ]
        assert waits, f"{task.id} never waits after decision {point}: it cannot be hibernated"
