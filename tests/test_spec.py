"""Agent specs: a valid spec becomes a record; every invalid one names its field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead.errors import SpecError
from stead.spec import DEFAULT_MAX_STEPS, AgentSpec, load_spec, parse_spec

SCRIPT = [{"tool": "read_file", "args": {"path": "a.txt"}}, {"finish": "done"}]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    (tmp_path / "seed").mkdir()
    return tmp_path


_DROP = object()  # a field value meaning "leave the field out"


def spec(**fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "renamer", "model": "scripted:script.yaml"}
    data.update(fields)
    return {k: v for k, v in data.items() if v is not _DROP}


def field_error(data: Any, base: Path, field: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(data, base)
    message = str(info.value)
    assert message.startswith(f"spec field '{field}':"), message
    return message


# -- valid specs ---------------------------------------------------------------------------


def test_a_minimal_spec_gets_defaults(base: Path) -> None:
    s = parse_spec(spec(), base)
    assert s == AgentSpec(name="renamer", model="scripted:script.yaml", base_dir=str(base))
    assert (s.tenant, s.autonomy, s.tools, s.goals) == ("default", "act_autonomously", (), ())
    assert s.max_steps == DEFAULT_MAX_STEPS
    assert s.script == SCRIPT


def test_a_full_spec_is_captured_in_its_record(base: Path) -> None:
    s = parse_spec(
        spec(
            name="  renamer  ",
            tenant="acme-corp.eu",
            instructions="Rename Cart to Basket.",
            tools=["read_file", "mytools:deploy"],
            autonomy="act_with_approval",
            goals=[
                "rename",
                {"id": "tests", "description": "tests pass", "accept": [{"files_exist": ["a.py"]}]},
            ],
            workspace="seed",
            limits={"max_steps": 7},
        ),
        base,
    )
    record = s.to_record()
    assert record == {
        "name": "renamer",
        "tenant": "acme-corp.eu",
        "instructions": "Rename Cart to Basket.",
        "model": "scripted:script.yaml",
        "model_options": None,
        "tools": ["read_file", "mytools:deploy"],
        "autonomy": "act_with_approval",
        "goals": [
            {"id": "rename", "description": "", "accept": []},
            {"id": "tests", "description": "tests pass", "accept": [{"files_exist": ["a.py"]}]},
        ],
        "workspace": str((base / "seed").resolve()),
        "limits": {
            "max_steps": 7,
            "command_seconds": 120.0,
            "workspace_mb": 1024,
            "workspace_files": 10_000,
        },
        "base_dir": str(base.resolve()),
        "script": SCRIPT,
        "scope": None,
        "tool_autonomy": {},
        "out_of_scope": "refuse",
        "monitors": None,
        "mcp": [],
        "on_text": "wait",
    }


def test_load_spec_reads_paths_relative_to_the_spec_file(base: Path) -> None:
    (base / "specs").mkdir()
    (base / "specs" / "s.yaml").write_text(
        yaml.safe_dump(spec(model="scripted:../script.yaml", workspace="../seed")),
        encoding="utf-8",
    )
    s = load_spec(base / "specs" / "s.yaml")
    assert s.workspace == str((base / "seed").resolve())
    assert s.script == SCRIPT


@pytest.mark.parametrize("limits", [None, {}])
def test_empty_limits_mean_the_default(base: Path, limits: Any) -> None:
    assert parse_spec(spec(limits=limits), base).max_steps == DEFAULT_MAX_STEPS


# -- invalid specs name the field ---------------------------------------------------------


def test_an_unknown_field_is_named_with_the_allowed_ones(base: Path) -> None:
    message = field_error(spec(modle="x"), base, "modle")
    assert "allowed fields are" in message
    assert "model" in message


@pytest.mark.parametrize("data", [[], "name: x", None, 3])
def test_a_spec_must_be_a_mapping(base: Path, data: Any) -> None:
    with pytest.raises(SpecError, match="YAML mapping"):
        parse_spec(data, base)


@pytest.mark.parametrize(("value", "problem"), [(_DROP, "required"), ("   ", "empty"), (3, "text")])
def test_bad_name(base: Path, value: Any, problem: str) -> None:
    assert problem in field_error(spec(name=value), base, "name")


@pytest.mark.parametrize("autonomy", ["yolo", "ACT_AUTONOMOUSLY", ""])
def test_bad_autonomy_lists_the_levels(base: Path, autonomy: str) -> None:
    message = field_error(spec(autonomy=autonomy), base, "autonomy")
    for level in ("observe", "advise", "act_with_approval", "act_autonomously"):
        assert level in message


@pytest.mark.parametrize("tenant", ["", "a b", "../etc", "-lead", "x" * 65, "t/1", "ü"])
def test_bad_tenant(base: Path, tenant: str) -> None:
    assert repr(tenant) in field_error(spec(tenant=tenant), base, "tenant")


def test_tenant_must_be_text(base: Path) -> None:
    field_error(spec(tenant=7), base, "tenant")


def test_missing_model(base: Path) -> None:
    assert "required" in field_error(spec(model=_DROP), base, "model")


@pytest.mark.parametrize("model", ["gpt-4", "scripted:", "gemini:pro", "scripted"])
def test_unknown_model(base: Path, model: str) -> None:
    assert "scripted:PATH" in field_error(spec(model=model), base, "model")


def test_a_providers_model_is_known(base: Path) -> None:
    s = parse_spec(spec(model="openai:gpt-4"), base)
    assert s.model == "openai:gpt-4" and s.script is None
    assert s.model_options is not None and s.model_options["provider"] == "openai"


def test_unreadable_script(base: Path) -> None:
    message = field_error(spec(model="scripted:missing.yaml"), base, "model")
    assert "cannot read the script" in message
    assert "missing.yaml" in message


def test_a_script_that_is_not_yaml(base: Path) -> None:
    (base / "bad.yaml").write_text("- {tool: [unclosed\n", encoding="utf-8")
    field_error(spec(model="scripted:bad.yaml"), base, "model")


def test_an_invalid_script_reports_its_decision(base: Path) -> None:
    (base / "bad.yaml").write_text("- finish: ok\n- explode: now\n", encoding="utf-8")
    message = field_error(spec(model="scripted:bad.yaml"), base, "model")
    assert "decision 2" in message
    assert "explode" in message


@pytest.mark.parametrize("tools", ["read_file", {"read_file": 1}])
def test_bad_tools(base: Path, tools: Any) -> None:
    field_error(spec(tools=tools), base, "tools")


@pytest.mark.parametrize(
    ("tools", "field"),
    [
        ([""], "tools[0]"),
        ([3], "tools[0]"),
        (["shell", {"tool": "shell", "x": 1}], "tools[1]"),
        ([{"tool": "shell", "secrets": "TOKEN"}], "tools[0].secrets"),
    ],
)
def test_bad_tool_entries_are_named(base: Path, tools: Any, field: str) -> None:
    field_error(spec(tools=tools), base, field)


def test_a_tool_entry_can_grant_secrets(base: Path) -> None:
    from stead.tools.registry import load_tools

    s = parse_spec(spec(tools=["read_file", {"tool": "shell", "secrets": ["TOKEN"]}]), base)
    loaded = load_tools(s.to_record()["tools"])
    assert loaded["shell"].secrets == ("TOKEN",) and loaded["read_file"].secrets == ()


@pytest.mark.parametrize(
    ("goals", "field"),
    [
        ("rename", "goals"),
        ({"id": "x"}, "goals"),
        ([3], "goals[0]"),
        (["ok", {"description": "no id"}], "goals[1].id"),
        ([{"id": "has space"}], "goals[0].id"),
        (["a", "a"], "goals[1].id"),
        ([{"id": "a", "owner": "me"}], "goals[0].owner"),
        ([{"id": "a", "accept": "tests pass"}], "goals[0].accept"),
    ],
)
def test_bad_goals(base: Path, goals: Any, field: str) -> None:
    field_error(spec(goals=goals), base, field)


@pytest.mark.parametrize("max_steps", [0, -1, 1.5, "10", True, None])
def test_bad_max_steps(base: Path, max_steps: Any) -> None:
    message = field_error(spec(limits={"max_steps": max_steps}), base, "limits.max_steps")
    assert repr(max_steps) in message


@pytest.mark.parametrize("limits", [{"max_stepz": 3}, ["max_steps"], "many"])
def test_bad_limits(base: Path, limits: Any) -> None:
    field_error(spec(limits=limits), base, "limits")


def test_workspace_folder_missing(base: Path) -> None:
    message = field_error(spec(workspace="no-such-folder"), base, "workspace")
    assert re.search(r"no-such-folder does not exist", message)


def test_workspace_that_is_a_file(base: Path) -> None:
    (base / "file.txt").write_text("x")
    field_error(spec(workspace="file.txt"), base, "workspace")


def test_workspace_must_be_a_path(base: Path) -> None:
    field_error(spec(workspace=["seed"]), base, "workspace")


def test_load_spec_errors_name_the_file(base: Path) -> None:
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(base / "nope.yaml")
    (base / "broken.yaml").write_text("name: [oops\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"broken\.yaml is not valid YAML"):
        load_spec(base / "broken.yaml")


@pytest.mark.parametrize("limits", [0, [], "", "max_steps: 3"])
def test_limits_that_are_not_a_mapping_are_refused(base: Path, limits: Any) -> None:
    assert "must be a mapping" in field_error(spec(limits=limits), base, "limits")


@pytest.mark.parametrize(
    ("field", "entry"),
    [
        ("scope[0].delegable", {"scope": [{"tool": "read_file", "delegable": "no"}]}),
        ("scope[0].reason", {"scope": [{"tool": "read_file", "reason": ["a", "b"]}]}),
        ("goals[0].description", {"goals": [{"id": "g", "description": {"a": 1}}]}),
    ],
)
def test_text_and_flags_are_what_they_say(field: str, entry: dict[str, Any]) -> None:
    """`delegable: no` is the text "no" (YAML 1.2): refused, not read as true."""
    with pytest.raises(SpecError, match=re.escape(f"'{field}'")):
        parse_spec({"name": "x", "model": "openai:m", **entry}, None)
    empty = {"name": "x", "model": "openai:m", "goals": [{"id": "g", "description": None}]}
    assert parse_spec(empty, None).goals[0]["description"] == ""
