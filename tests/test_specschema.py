"""The spec's JSON Schema: valid, shipped as generated, and in agreement with the
reader on every spec the repository holds."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from stead.errors import SpecError
from stead.spec import FIELDS, load_spec, parse_spec
from stead.speccheck import check_text, schema_problems
from stead.specschema import schema_text, shipped_schema_text, spec_schema
from stead.yamlsafe import load_yaml, load_yaml_lines

ROOT = Path(__file__).parents[1]
SHIPPED = ROOT / "src" / "stead" / "schemas" / "agent-spec.schema.json"
_HELPERS = ("write_agent", "write_spec")


def test_the_schema_is_valid_draft_2020_12() -> None:
    schema = spec_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] and schema["title"]


def test_the_shipped_file_is_the_generated_schema() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == schema_text(), (
        "src/stead/schemas/agent-spec.schema.json is out of date; regenerate it with "
        "`stead spec schema > src/stead/schemas/agent-spec.schema.json`"
    )
    assert shipped_schema_text() == schema_text()


def test_every_spec_field_has_a_description_for_users() -> None:
    properties = spec_schema()["properties"]
    assert list(properties) == list(FIELDS)
    for name, prop in properties.items():
        text = prop["description"]
        assert text.endswith(".") and 20 < len(text) < 400, name


def _properties(node: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties":
                for name, prop in value.items():
                    yield f"{where}.{name}", prop
                    yield from _properties(prop, f"{where}.{name}")
            else:
                yield from _properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _properties(item, f"{where}[{i}]")


def test_every_property_at_every_level_says_what_it_is() -> None:
    missing = [where for where, prop in _properties(spec_schema()) if not prop.get("description")]
    assert not missing, missing


def test_unknown_keys_are_refused_where_the_reader_refuses_them() -> None:
    defs = spec_schema()["$defs"]
    closed = [
        spec_schema(),
        spec_schema()["properties"]["limits"],
        defs["grant"],
        defs["constraint"],
        defs["goal"]["anyOf"][1],
        defs["toolEntry"]["anyOf"][1],
        defs["providerModel"]["anyOf"][1],
        defs["mcp"]["items"],
        defs["monitors"],
        *defs["check"]["anyOf"],
    ]
    assert all(part["additionalProperties"] is False for part in closed)


# -- every spec in the repository ----------------------------------------------------


def _harvest() -> Iterator[tuple[str, Any]]:
    """Specs the repository holds: files, fenced yaml in the docs, and those the tests
    write (YAML text, dict literals, and the keywords of their spec-writing helpers)."""
    files = [
        *ROOT.glob("examples/**/*.y*ml"),
        *ROOT.glob("tests/**/*.y*ml"),
        *ROOT.glob("src/stead/demo/**/*.y*ml"),
    ]
    for path in files:
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    for md in [ROOT / "README.md", *sorted(ROOT.glob("docs/**/*.md"))]:
        blocks = re.findall(r"```yaml[^\n]*\n(.*?)```", md.read_text(), re.S)
        for i, block in enumerate(blocks):
            yield f"{md.relative_to(ROOT)} yaml block {i}", block
    for path in sorted(ROOT.glob("tests/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "model:" in node.value:
                    yield where, textwrap.dedent(node.value)
            elif isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if {"name", "model"} <= keys:
                    yield where, _literal(node)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in _HELPERS:
                spec = {k.arg: _literal(k.value) for k in node.keywords if k.arg}
                if all(v is not _UNKNOWN for v in spec.values()):
                    yield where, {"name": "t", "model": "scripted:script.yaml", **spec}


_UNKNOWN = object()


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _UNKNOWN


def _accepted_specs(tmp: Path) -> list[tuple[str, Any, Path]]:
    """Those of the harvest that parse_spec accepts, with the files they name made."""
    out = []
    for i, (where, found) in enumerate(_harvest()):
        data = found
        if isinstance(found, str):
            try:
                data = load_yaml(found, where, SpecError)
            except SpecError:
                continue
        if not isinstance(data, dict) or not {"name", "model"} <= set(data):
            continue
        base = tmp / str(i)
        base.mkdir()
        model = data["model"]
        if isinstance(model, str) and model.startswith("scripted:") and "\x00" not in model:
            script = base / model.partition(":")[2]
            if script.resolve().is_relative_to(base):
                script.parent.mkdir(parents=True, exist_ok=True)
                script.write_text("- {finish: done}\n", encoding="utf-8")
        if isinstance(data.get("workspace"), str) and ".." not in data["workspace"]:
            (base / data["workspace"]).mkdir(parents=True, exist_ok=True)
        try:
            parse_spec(data, base)
        except SpecError:
            continue
        out.append((where, data, base))
    return out


def test_every_spec_the_repository_holds_that_the_reader_accepts_is_valid(
    tmp_path: Path,
) -> None:
    accepted = _accepted_specs(tmp_path)
    assert len(accepted) >= 40, f"found only {len(accepted)} specs; is the harvest broken?"
    assert any(where.startswith("docs/tutorials/") for where, _, _ in accepted)
    wrong = {where: schema_problems(data, {}) for where, data, _ in accepted}
    assert not {k: v for k, v in wrong.items() if v}


def test_the_demo_spec_checks_clean() -> None:
    path = ROOT / "src" / "stead" / "demo" / "spec.yaml"
    load_spec(path)
    assert check_text(path.read_text(encoding="utf-8"), path.parent) == []


# -- the editor path ----------------------------------------------------------------


EDITOR_SPEC = """\
# yaml-language-server: $schema=https://example.invalid/agent-spec.schema.json
name: tidy
model: openai:gpt-4o-mini
instructions: Tidy the README.
"""


def test_a_spec_with_the_editor_comment_loads_and_checks(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(EDITOR_SPEC, encoding="utf-8")
    assert load_spec(path).name == "tidy"
    assert check_text(EDITOR_SPEC, tmp_path) == []


def test_the_docs_show_the_editor_comment() -> None:
    text = (ROOT / "docs" / "specs.md").read_text(encoding="utf-8")
    assert "# yaml-language-server: $schema=" in text


# -- misspelled keys at each level ---------------------------------------------------

VALID: dict[str, Any] = {
    "name": "t",
    "model": "openai:gpt-4o-mini",
    "limits": {"max_steps": 5},
    "goals": [{"id": "g", "description": "d", "accept": [{"command": "true"}]}],
    "scope": [{"tool": "read_file", "max_uses": 3}],
    "tools": [{"tool": "read_file", "secrets": []}],
}


@pytest.mark.parametrize(
    ("path", "typo"),
    [
        ((), "instructons"),
        (("limits",), "max_step"),
        (("goals", 0), "descripton"),
        (("scope", 0), "max_use"),
        (("tools", 0), "secret"),
        (("goals", 0, "accept", 0), "timout"),
    ],
)
def test_a_misspelled_key_is_refused_by_both(path: tuple[Any, ...], typo: str) -> None:
    data = _copy(VALID)
    parse_spec(data, None)
    assert schema_problems(data, {}) == []
    target = data
    for part in path:
        target = target[part]
    target[typo] = 1
    with pytest.raises(SpecError):
        parse_spec(data, None)
    problems = schema_problems(data, {})
    assert [p.field.rpartition(".")[2] for p in problems] == [typo], problems
    assert "did you mean" in problems[0].message


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# -- where each value is written -----------------------------------------------------


def test_the_line_map_places_keys_items_and_merged_keys() -> None:
    text = "a: 1\nbase: &b\n  x: 1\nc:\n  <<: *b\n  y: [1, {z: 2}]\n"
    data, lines = load_yaml_lines(text, "t", SpecError)
    assert data["c"] == {"x": 1, "y": [1, {"z": 2}]}
    assert lines[()] == (1, 1)
    assert lines[("a",)] == (1, 1)
    assert lines[("c", "y")] == (6, 3)
    assert lines[("c", "y", 1)] == (6, 10)
    assert lines[("c", "y", 1, "z")] == (6, 11)
    assert lines[("c", "x")] == (3, 3)  # merged: where it is written


def test_the_line_map_keeps_the_readers_limits() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    with pytest.raises(SpecError, match="aliases expanded"):
        load_yaml_lines(bomb, "t", SpecError)
    with pytest.raises(SpecError, match="given twice"):
        load_yaml_lines("a: 1\na: 2\n", "t", SpecError)
