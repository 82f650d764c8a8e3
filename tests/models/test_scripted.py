"""The scripted model: parsing every decision form, and replaying by step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead.errors import ModelError, ScriptError
from stead.models.base import Decision, RenderedContext, parse_action, parse_decision
from stead.models.scripted import ScriptedModel


def ctx(step: int) -> RenderedContext:
    return RenderedContext(text=f"step {step}", hash="0" * 64, step=step, tools=())


def actions(item: Any) -> list[dict[str, Any]]:
    return parse_decision(item, "test").to_json()


# -- every decision form -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            {"tool": "write_file", "args": {"path": "a", "content": "b"}},
            [{"type": "tool", "tool": "write_file", "args": {"path": "a", "content": "b"}}],
        ),
        ({"tool": "list_files"}, [{"type": "tool", "tool": "list_files", "args": {}}]),
        (
            {"tool": "list_files", "args": None},
            [{"type": "tool", "tool": "list_files", "args": {}}],
        ),
        (
            {"tools": [{"tool": "a"}, {"tool": "b", "args": {"x": 1}}]},
            [
                {"type": "tool", "tool": "a", "args": {}},
                {"type": "tool", "tool": "b", "args": {"x": 1}},
            ],
        ),
        (
            {"actions": [{"remember": {"k": 1}}, {"tool": "t"}, {"finish": "ok"}]},
            [
                {"type": "remember", "values": {"k": 1}},
                {"type": "tool", "tool": "t", "args": {}},
                {"type": "finish", "summary": "ok"},
            ],
        ),
        (
            {"remember": {"colour": "blue", 3: [1, 2]}},
            [{"type": "remember", "values": {"colour": "blue", "3": [1, 2]}}],
        ),
        ({"push_goal": "tests"}, [{"type": "push_goal", "id": "tests", "description": ""}]),
        (
            {"push_goal": {"id": "tests", "description": "make them pass"}},
            [{"type": "push_goal", "id": "tests", "description": "make them pass"}],
        ),
        ({"complete_goal": "tests"}, [{"type": "complete_goal", "id": "tests"}]),
        ({"finish": "all done"}, [{"type": "finish", "summary": "all done"}]),
        ({"finish": None}, [{"type": "finish", "summary": ""}]),
        ({"finish": 42}, [{"type": "finish", "summary": "42"}]),
        ({"wait_for_input": "Which file?"}, [{"type": "wait_for_input", "prompt": "Which file?"}]),
        ({"wait_for_input": None}, [{"type": "wait_for_input", "prompt": ""}]),
        ({"say": "Which file?"}, [{"type": "say", "text": "Which file?"}]),
        (
            {"text": "why", "tools": [{"tool": "t"}]},
            [{"type": "tool", "tool": "t", "args": {}}],
        ),
    ],
)
def test_decision_forms(item: Any, expected: list[dict[str, Any]]) -> None:
    assert actions(item) == expected


@pytest.mark.parametrize(
    "stored",
    [
        {"type": "tool", "tool": "t", "args": {"a": 1}},
        {"type": "remember", "values": {"k": "v"}},
        {"type": "push_goal", "id": "g", "description": "d"},
        {"type": "complete_goal", "id": "g"},
        {"type": "finish", "summary": "s"},
        {"type": "wait_for_input", "prompt": "p"},
        {"type": "say", "text": "t"},
    ],
)
def test_stored_actions_parse_back_to_themselves(stored: dict[str, Any]) -> None:
    assert parse_action(stored, "x") == stored
    assert actions({"actions": [stored]}) == [stored]


def test_a_whole_script_from_yaml() -> None:
    model = ScriptedModel.from_yaml(
        """
        - tool: read_file
          args: {path: README.md}
        - tools:
            - {tool: write_file, args: {path: a.txt, content: hi}}
            - {tool: list_files}
        - actions:
            - remember: {seen: true}
            - push_goal: {id: check, description: look again}
        - complete_goal: check
        - wait_for_input: Shall I go on?
        - finish: renamed everything
        """
    )
    kinds = [[a["type"] for a in d.actions] for d in model.decisions]
    assert kinds == [
        ["tool"],
        ["tool", "tool"],
        ["remember", "push_goal"],
        ["complete_goal"],
        ["wait_for_input"],
        ["finish"],
    ]


# -- bad decisions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ("finish", "must be a mapping"),
        (["finish"], "must be a mapping"),
        ({}, "exactly one of"),
        ({"finish": "a", "remember": {"k": 1}}, "exactly one of"),
        ({"explode": "now"}, "unknown action 'explode'"),
        ({"tool": 3}, "'tool' must be a name"),
        ({"tool": "t", "args": [1, 2]}, "'args' a mapping"),
        ({"tool": "t", "argz": {}}, "not argz"),
        ({"remember": {}}, "non-empty mapping"),
        ({"remember": "x"}, "non-empty mapping"),
        ({"push_goal": 3}, "'push_goal' takes an id"),
        ({"push_goal": {"description": "no id"}}, "'push_goal' takes an id"),
        ({"complete_goal": {"id": "g"}}, "'complete_goal' takes a goal id"),
        ({"actions": []}, "non-empty list"),
        ({"actions": "finish"}, "non-empty list"),
        ({"tools": []}, "non-empty list"),
        ({"tools": [{"tool": "t"}, {"finish": "x"}]}, "action 2: 'tools' lists only tool calls"),
        ({"actions": [{"finish": "x"}, {"bogus": 1}]}, "action 2: unknown action"),
        ({"type": "teleport"}, "unknown action type 'teleport'"),
    ],
)
def test_bad_decisions_raise_script_error(item: Any, match: str) -> None:
    with pytest.raises(ScriptError, match=match):
        parse_decision(item, "where")


def test_errors_say_which_decision() -> None:
    with pytest.raises(ScriptError, match=r"my\.yaml: decision 3, action 1"):
        ScriptedModel.from_data([{"finish": "a"}, {"finish": "b"}, {"remember": {}}], "my.yaml")


@pytest.mark.parametrize("data", [None, {"finish": "x"}, "finish"])
def test_a_script_must_be_a_list(data: Any) -> None:
    with pytest.raises(ScriptError, match="YAML list of decisions"):
        ScriptedModel.from_data(data)


def test_bad_yaml_raises_script_error() -> None:
    with pytest.raises(ScriptError, match="not valid YAML"):
        ScriptedModel.from_yaml("- {finish: [unclosed\n")


def test_from_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("- finish: done\n", encoding="utf-8")
    model = ScriptedModel.from_file(path)
    assert model.decide(ctx(0)).to_json() == [{"type": "finish", "summary": "done"}]
    with pytest.raises(ScriptError, match="cannot read script"):
        ScriptedModel.from_file(tmp_path / "missing.yaml")


# -- replay ---------------------------------------------------------------------------------


def test_the_nth_decision_is_returned_for_step_n() -> None:
    model = ScriptedModel.from_data([{"remember": {"n": i}} for i in range(5)])
    for step in (3, 0, 4, 1, 1, 2):  # any order, any number of times: no hidden state
        decision = model.decide(ctx(step))
        assert isinstance(decision, Decision)
        assert decision.to_json() == [{"type": "remember", "values": {"n": step}}]


def test_an_exhausted_script_raises_model_error() -> None:
    model = ScriptedModel.from_data([{"finish": "a"}, {"finish": "b"}])
    with pytest.raises(ModelError, match="2 decisions"):
        model.decide(ctx(2))
    with pytest.raises(ModelError):
        model.decide(ctx(10))
    with pytest.raises(ModelError):
        ScriptedModel([]).decide(ctx(0))


def test_a_negative_step_is_refused() -> None:
    model = ScriptedModel.from_data([{"finish": "x"}])
    with pytest.raises(ModelError, match="not a step"):
        model.decide(ctx(-1))


def test_the_words_beside_a_decisions_calls() -> None:
    said = parse_decision({"text": "the mail asks", "actions": [{"tool": "t"}]}, "x")
    assert said.text == "the mail asks"
    assert parse_decision({"tool": "t"}, "x").text == ""
