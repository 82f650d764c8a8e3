"""Fuzzing what comes from outside: spec and script text, and command-line arguments.

Whatever is given, the answer is exit 2 (or a clean success) with a one-line
message, never a traceback, and the store is left as it was. Bounded: a modest
number of examples, no deadline, no timing assertions.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stead.cli.main import main
from stead.errors import ScriptError, SpecError
from stead.models.scripted import ScriptedModel
from stead.runtime.runtime import Runtime
from stead.spec import load_spec

from .test_cli import call

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

# YAML-ish fragments, so examples reach the parser's corners, not only its first check
_PIECES = st.sampled_from(
    [
        "name: x\n", "model: scripted:script.yaml\n", "tools: [read_file]\n",
        "tools: [os:system]\n",
        "monitors: hi\n", "monitors: {loop: {repeat: -1}}\n", "probing: {off: true}\n",
        "scope: [{tool: read_file, valid_for: 1e99}]\n", "a: &a [1, 2]\n", "b: [*a, *a]\n",
        "- {finish: done}\n", "- {tool: read_file, args: {path: .nan}}\n", "x: !!binary aGk=\n",
        "- {remember: {k: 2024-01-01}}\n", "[[[[", "]]", "{", "}", ": ", "- ", "'", '"\\ud800"',
        "\t", "\x00", "\ufeff", "limits: {max_steps: 0}\n", "goals: [{id: ../x}]\n", "*b\n",
        "name: x\nname: y\n", "tenant: ''\n",
    ]
)  # fmt: skip
_TEXT = st.one_of(
    st.lists(_PIECES, max_size=8).map("".join),
    st.text(max_size=200),
)
_BYTES = st.one_of(
    _TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=200),
    _TEXT.map(lambda t: t.encode("utf-16")),
)


@FUZZ
@given(spec=_BYTES, script=_BYTES)
def test_the_spec_and_script_parsers_refuse_cleanly(
    tmp_path: Path, spec: bytes, script: bytes
) -> None:
    (tmp_path / "spec.yaml").write_bytes(spec)
    (tmp_path / "script.yaml").write_bytes(script)
    try:
        load_spec(tmp_path / "spec.yaml")
    except SpecError as exc:
        assert "\n" not in str(exc)
    try:
        ScriptedModel.from_file(tmp_path / "script.yaml")
    except ScriptError as exc:
        assert "\n" not in str(exc)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store with one agent, and the digest of its file: no fuzzed command may change it."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "script.yaml").write_text("- {wait_for_input: '?'}\n", encoding="utf-8")
    (root / "spec.yaml").write_text(
        "name: fz\nmodel: scripted:script.yaml\ntools: [read_file]\n", encoding="utf-8"
    )
    url = f"sqlite:///{root / 'stead.db'}"
    assert main(["run", str(root / "spec.yaml"), "--id", "ag_fz", "--store", url]) == 3
    Runtime(url, root).close()
    return root, url


def _digest(root: Path) -> str:
    """What the store holds (read through a read-only connection, which changes nothing)."""
    db = sqlite3.connect(f"file:{root / 'stead.db'}?mode=ro", uri=True)
    try:
        return hashlib.sha256("\n".join(db.iterdump()).encode()).hexdigest()
    finally:
        db.close()


_COMMANDS = st.sampled_from(
    [
        ["run", "SPEC"], ["run"], ["show"], ["trace"], ["grant", "ag_fz"],
        ["grant", "ag_fz", "shell"],
        ["approve"], ["scope"], ["work"], ["ls"], ["policy", "set"], ["rollback", "ag_fz"],
        ["autonomy", "ag_fz"], ["signoff", "ag_fz"], ["lineage", "ag_fz"], ["audit", "verify"],
        ["snapshots"], ["secret", "rm"], ["deny"], ["revoke", "ag_fz"], ["clear", "ag_fz"],
    ]
)  # fmt: skip
_ARGS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "--id", "--max-steps", "--valid-for", "--tenant", "--concurrency", "--arg",
                "--hibernate-after", "--as", "--at", "--to", "", "0", "-1", "1e999", "nan",
                "99999999999d", "../../etc", "ag_fz", "n=max:1e999", "[bold]", "x" * 300,
                "\udcff", "shell", "observe", "--json", "--reason", "--max-uses", "--poll",
            ]
        ),
        st.text(max_size=20),
    ),
    max_size=5,
)  # fmt: skip


@FUZZ
@given(command=_COMMANDS, args=_ARGS)
def test_command_lines_never_traceback_and_refusals_change_nothing(
    shared: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    args: list[str],
) -> None:
    root, url = shared
    before = _digest(root)
    argv = [str(root / "spec.yaml") if a == "SPEC" else a for a in [*command, *args]]
    argv += ["--store", url]
    code = call(*argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, argv
    if code in (0, 3):
        return  # well-formed after all (a read, a valid grant, a new agent waiting): accepted
    assert code == 2, (argv, code, captured.err)
    assert len(captured.err.strip().splitlines()) == 1, (argv, captured.err)
    assert _digest(root) == before, argv
