"""``stead spec check`` and ``stead spec schema``, through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stead.cli.main import main
from stead.specschema import spec_schema

THREE_PROBLEMS = """\
name: tidy
model: openai:gpt-4o-mini
instructons: Tidy the README.
limits:
  max_steps: 0
goals:
  - id: readme
    accept:
      - {command: "true", timout: 5}
"""


def test_check_reports_every_problem_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text(THREE_PROBLEMS, encoding="utf-8")
    assert main(["spec", "check", str(spec)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"{spec}:3:1: instructons: ")
    assert "did you mean 'instructions'?" in lines[0]
    assert lines[1].startswith(f"{spec}:5:3: limits.max_steps: ")
    assert "minimum of 1" in lines[1]
    assert lines[2].startswith(f"{spec}:9:27: goals[0].accept[0].timout: ")
    assert "did you mean 'timeout'?" in lines[2]


def test_a_missing_field_points_at_the_mapping_that_lacks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text("name: x\nmodel: openai:m\nscope:\n  - reason: why\n", encoding="utf-8")
    assert main(["spec", "check", str(spec)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{spec}:4:5: scope[0].tool: is required")


def test_after_the_schema_the_reader_checks_the_files_a_spec_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text("name: x\n\nmodel: scripted:missing.yaml\n", encoding="utf-8")
    assert main(["spec", "check", str(spec)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{spec}:3:1: model: ") and "missing.yaml" in line


def test_a_good_spec_is_ok_and_an_unreadable_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "script.yaml").write_text("- {finish: done}\n", encoding="utf-8")
    good = tmp_path / "good.yaml"
    good.write_text("name: x\nmodel: scripted:script.yaml\n", encoding="utf-8")
    assert main(["spec", "check", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: ok\n"
    assert main(["spec", "check", str(good), str(tmp_path / "absent.yaml")]) == 2
    captured = capsys.readouterr()
    assert captured.out == f"{good}: ok\n"
    assert "absent.yaml" in captured.err


def test_bad_yaml_is_reported_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text("name: x\nmodel: openai:m\ntools: [a\n", encoding="utf-8")
    assert main(["spec", "check", str(spec)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{spec}:4:1: (file): ") and "not valid YAML" in line


def test_check_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text(THREE_PROBLEMS, encoding="utf-8")
    assert main(["spec", "check", "--json", str(spec)]) == 1
    (report,) = json.loads(capsys.readouterr().out)
    assert report["file"] == str(spec)
    assert [(p["line"], p["field"]) for p in report["problems"]] == [
        (3, "instructons"),
        (5, "limits.max_steps"),
        (9, "goals[0].accept[0].timout"),
    ]


def test_schema_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "schema"]) == 0
    text = capsys.readouterr().out
    assert json.loads(text) == spec_schema()
    assert text.startswith('{\n  "$schema"')


def test_a_wrong_type_says_what_is_wanted_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text("name: x\nmodel: openai:m\ntools: read_file\n", encoding="utf-8")
    assert main(["spec", "check", str(spec)]) == 1
    assert capsys.readouterr().out == f"{spec}:3:1: tools: must be a list, got 'read_file'\n"
