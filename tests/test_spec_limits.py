"""Specs and scripts from outside are read under limits and must be plain data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stead.errors import ScriptError, SpecError
from stead.integrity.monitors import Probing
from stead.models.scripted import ScriptedModel
from stead.spec import load_spec, parse_spec
from stead.yamlsafe import MAX_FILE_BYTES

from .cli.test_cli import write_agent


def bomb(levels: int = 7) -> str:
    """The billion laughs: each level is nine aliases of the one before."""
    text = 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    for n in range(1, levels + 1):
        text += f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]\n"
    return text


def spec_with_script(tmp_path: Path, script_text: str) -> Path:
    (tmp_path / "script.yaml").write_text(script_text, encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nmodel: scripted:script.yaml\ntools: [read_file]\n", encoding="utf-8")
    return spec


def refused(path: Path, *needles: str) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


def test_an_alias_bomb_in_a_script_is_refused_before_it_expands(tmp_path: Path) -> None:
    script = "- {finish: done}\n- bomb: &b\n" + "".join(
        "    " + line + "\n" for line in bomb().splitlines()
    )
    refused(spec_with_script(tmp_path, script), "aliases expanded")


def test_an_alias_bomb_in_a_spec_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(bomb() + "name: x\n", encoding="utf-8")
    refused(spec, "aliases expanded")


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {x: *a}\n", "a: &a [[1, [*a]]]\n"])
def test_an_alias_that_holds_itself_is_refused(tmp_path: Path, text: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text + "name: x\n", encoding="utf-8")
    refused(spec, "refers to a list or mapping that holds it")


def test_a_few_aliases_are_still_fine(tmp_path: Path) -> None:
    script = "- {tool: read_file, args: &a {path: a.txt}}\n- {tool: read_file, args: *a}\n"
    spec = load_spec(spec_with_script(tmp_path, script + "- {finish: ok}\n"))
    assert spec.script is not None and spec.script[1]["args"] == {"path": "a.txt"}


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("name: x\n".encode("utf-16"), "not UTF-8"),
        (b"name: caf\xe9\n", "not UTF-8"),
        (b"name: x\nname: y\nmodel: scripted:s.yaml\n", "given twice"),
        (("a: " + "[" * 2000 + "]" * 2000 + "\n").encode(), "nests deeper"),
        (b"name: x\nmodel: scripted:s.yaml\nmonitors: hi\n", "monitors must be a mapping"),
        (b'name: "\\ud800"\nmodel: scripted:s.yaml\n', "lone surrogate"),
        (b"name: !!binary aGVsbG8=\nmodel: scripted:s.yaml\n", "bytes"),
    ],
)
def test_bad_spec_files_are_refused_in_one_line(tmp_path: Path, data: bytes, needle: str) -> None:
    (tmp_path / "s.yaml").write_text("- {finish: ok}\n", encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(data)
    refused(spec, needle)


@pytest.mark.parametrize(
    ("decision", "needle"),
    [
        ("- {tool: read_file, args: {path: .nan}}\n", "finite"),
        ("- {tool: read_file, args: {path: .inf}}\n", "finite"),
        ("- {tool: read_file, args: {path: !!binary aGVsbG8=}}\n", "bytes"),
        ("- {tool: read_file, args: {path: !!set {a}}}\n", "set"),
        ('- {finish: "\\udc80"}\n', "lone surrogate"),
        ("- {finish: a, finish: b}\n", "given twice"),
    ],
)
def test_values_that_are_not_plain_data_are_refused_in_scripts(
    tmp_path: Path, decision: str, needle: str
) -> None:
    refused(spec_with_script(tmp_path, decision), needle)


def test_a_date_in_a_script_is_text(tmp_path: Path) -> None:
    spec = load_spec(spec_with_script(tmp_path, "- {finish: 2024-01-01}\n"))
    assert spec.script == [{"finish": "2024-01-01"}]


def test_a_script_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nmodel: scripted:/dev/zero\n", encoding="utf-8")
    refused(spec, "not a regular file")
    with pytest.raises(ScriptError, match="not a regular file"):
        ScriptedModel.from_file("/dev/zero")


def test_files_over_the_size_limit_are_refused(tmp_path: Path) -> None:
    refused(
        spec_with_script(tmp_path, "- {finish: ok}\n" + "#" * MAX_FILE_BYTES + "\n"), "larger than"
    )
    spec = tmp_path / "big.yaml"
    spec.write_text("name: x\n" + "#" * MAX_FILE_BYTES, encoding="utf-8")
    refused(spec, "larger than")


@pytest.mark.parametrize(
    ("monitors", "needle"),
    [
        ({"loop": {"repeat": -1}}, "monitors.loop.repeat"),
        ({"loop": {"repeat": 2.5}}, "whole number"),
        ({"budget": {"tool_calls": "a"}}, "monitors.budget.tool_calls"),
        ({"probing": {"window": 0}}, "above 0"),
        ({"probing": {"off": "yes"}}, "true or false"),
        ({"dataflow": {"outbound": "post"}}, "list of tool names"),
        ({"custom": "x"}, "must be a list"),
    ],
)
def test_monitor_settings_of_the_wrong_kind_are_refused(
    tmp_path: Path, monitors: dict[str, Any], needle: str
) -> None:
    refused(write_agent(tmp_path, [{"finish": "ok"}], monitors=monitors), needle)


def test_the_documented_probing_off_form_turns_probing_off(tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text("- {finish: ok}\n", encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    # written exactly as the README shows it, unquoted
    spec.write_text(
        "name: x\nmodel: scripted:script.yaml\nmonitors:\n  probing: {off: true}\n",
        encoding="utf-8",
    )
    loaded = load_spec(spec)
    assert loaded.monitors == {"probing": {"off": True}}
    from stead.integrity.monitor_config import build_monitors

    rules = build_monitors(loaded.monitors).rules
    assert not any(isinstance(r, Probing) for r in rules)


@pytest.mark.parametrize("valid_for", [99999999999 * 86400, 0, -5, ".nan", ".inf", "2024-01-01"])
def test_a_scope_valid_for_out_of_bounds_is_refused(tmp_path: Path, valid_for: Any) -> None:
    (tmp_path / "script.yaml").write_text("- {finish: ok}\n", encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: x\nmodel: scripted:script.yaml\ntools: [read_file]\n"
        f"scope: [{{tool: read_file, valid_for: {valid_for}}}]\n",
        encoding="utf-8",
    )
    message = refused(spec)
    assert "valid_for" in message or "finite" in message


def test_a_ten_year_scope_is_accepted(tmp_path: Path) -> None:
    path = write_agent(
        tmp_path, [{"finish": "ok"}], scope=[{"tool": "read_file", "valid_for": 86400 * 3650}]
    )
    assert load_spec(path).scope is not None


def test_yaml_helpers_still_read_what_the_readme_shows(tmp_path: Path) -> None:
    # the README's scripted decisions, unchanged, still load
    script = [
        {"tool": "write_file", "args": {"path": "src/app.py", "content": "print('hi')\n"}},
        {"remember": {"progress": "app.py rewritten"}},
        {"wait_for_input": "Which branch should I use?"},
        {"finish": "renamed everywhere"},
    ]
    model = ScriptedModel.from_yaml(yaml.safe_dump(script))
    assert len(model.decisions) == 4


@pytest.mark.parametrize(
    ("field", "value"), [("tenant", "a..b"), ("goal", "g..h"), ("goal", "z\n")]
)
def test_spec_ids_follow_the_one_id_rule(tmp_path: Path, field: str, value: str) -> None:
    (tmp_path / "script.yaml").write_text("- {finish: done}\n", encoding="utf-8")
    data: dict[str, object] = {"name": "x", "model": "scripted:script.yaml"}
    if field == "tenant":
        data["tenant"] = value
    else:
        data["goals"] = [{"id": value, "description": "d"}]
    with pytest.raises(SpecError, match="tenant" if field == "tenant" else r"goals\[0\]\.id"):
        parse_spec(data, tmp_path)
