"""Optional parts come with extras: a missing one is refused in one line, with the pip
command that brings it, never a traceback (.ci/check-package checks the real wheel)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from stead.cli.main import main
from stead.errors import MissingExtra, UsageError
from stead.extras import EXTRAS, need


def test_a_missing_extra_is_named_with_its_pip_command() -> None:
    with pytest.raises(MissingExtra) as caught:
        need("stead_no_such_module", "postgres", "a PostgreSQL store")
    said = str(caught.value)
    assert "a PostgreSQL store needs the 'postgres' extra" in said
    assert said.endswith("pip install 'stead[postgres]'")
    assert isinstance(caught.value, UsageError)
    need("json", "server", "anything")  # installed: nothing said


@pytest.mark.parametrize(
    ("argv", "module", "extra"),
    [
        (["serve"], "uvicorn", "server"),
        (["work", "--in-flight", "3"], "aiohttp", "inflight"),
        (["ls", "--store", "postgresql://127.0.0.1/test"], "psycopg", "postgres"),
    ],
)
def test_a_command_without_its_extra_says_so_in_one_line(
    argv: list[str], module: str, extra: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], tmp_path: Any,
) -> None:  # fmt: skip
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == module else found(name, *a))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"pip install 'stead[{extra}]'" in err, err
    assert "Traceback" not in err


def test_every_extra_is_declared_in_the_package() -> None:
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    declared = project["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared)
    assert declared["all"] == [f"stead[{','.join(EXTRAS)}]"]
