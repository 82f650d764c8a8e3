"""Bad input on the command line: exit 2, one line saying what to fix, nothing stored."""

from __future__ import annotations

import base64
import contextlib
import io
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stead.cli.main import main
from stead.runtime.runtime import Runtime
from stead.store import sqlite_open

from ..needs import missing
from .test_cli import call, run_json, write_agent


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'db' / 'stead.db'}"
    Runtime(url, tmp_path / "db").close()
    return url


def refused(capsys: pytest.CaptureFixture[str], *argv: str, needle: str = "") -> str:
    """Run a command that must be refused: exit 2, one line, no traceback."""
    code = call(*argv)
    captured = capsys.readouterr()
    message = captured.err.strip()
    assert code == 2, (argv, captured)
    assert "Traceback" not in captured.err and len(message.splitlines()) == 1, message
    assert needle in message, message
    return message


def agent_ids(store: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    code, agents = run_json(capsys, "ls", "--store", store)
    assert code == 0
    return [a["agent_id"] for a in agents]


def events(store: str, agent: str, capsys: pytest.CaptureFixture[str]) -> int:
    capsys.readouterr()
    assert main(["trace", agent, "--store", store, "--json"]) == 0
    return len(capsys.readouterr().out.splitlines())


# -- item 11 and 12: nothing is created from a spec that cannot run --------------------


def write_tools(tmp_path: Path) -> None:
    (tmp_path / "hosttools.py").write_text(
        "import stead\n\n"
        "@stead.tool(effect='read_only')\n"
        "def ping() -> str:\n    return 'pong'\n\n"
        "@stead.tool(effect='read_only', name='ping')\n"
        "def ping2() -> str:\n    return 'pong'\n\n"
        "def plain() -> str:\n    return 'not a tool'\n",
        encoding="utf-8",
    )
    (tmp_path / "broken.py").write_text("raise RuntimeError('import fails')\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"tools": ["no_such_tool"]}, "unknown tool"),
        ({"tools": ["nosuchmodule:f"]}, "cannot import"),
        ({"tools": ["broken:f"]}, "cannot import"),
        ({"tools": ["hosttools:missing"]}, "has no"),
        ({"tools": ["hosttools:ping", "hosttools:ping2"]}, "two tools are named"),
        ({"tools": ["read_file", "read_file"]}, "two tools are named"),
        ({"tools": ["os:system"]}, "not declared as a tool"),
        ({"tools": ["hosttools:plain"]}, "not declared as a tool"),
        ({"monitors": {"custom": [{"python": "nosuchmodule:rule"}]}}, "cannot import"),
        ({"monitors": {"custom": [{"python": "hosttools:nothing"}]}}, "has no"),
    ],
)
def test_a_spec_whose_tools_or_monitors_cannot_load_creates_nothing(
    tmp_path: Path,
    store: str,
    capsys: pytest.CaptureFixture[str],
    spec: dict[str, Any],
    needle: str,
) -> None:
    write_tools(tmp_path)
    path = write_agent(tmp_path, [{"finish": "ok"}], **spec)
    refused(capsys, "run", str(path), "--store", store, needle=needle)
    assert agent_ids(store, capsys) == []
    # and a worker has nothing to report as broken
    code, report = run_json(capsys, "work", "--store", store)
    assert code == 0 and report["errors"] == {} and report["ran"] == {}


def test_a_declared_tool_in_a_module_is_still_accepted(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tools(tmp_path)
    path = write_agent(tmp_path, [{"tool": "ping"}, {"finish": "ok"}], tools=["hosttools:ping"])
    code, result = run_json(capsys, "run", str(path), "--store", store)
    assert code == 0 and result["status"] == "completed"


# -- item 8: validity windows ------------------------------------------------------------


def test_a_far_future_grant_is_refused_before_it_is_journaled(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_agent(tmp_path, [{"wait_for_input": "?"}])
    assert call("run", str(path), "--id", "ag_v", "--store", store) == 3
    capsys.readouterr()
    before = events(store, "ag_v", capsys)
    message = refused(
        capsys, "grant", "ag_v", "shell", "--valid-for", "99999999999d", "--store", store
    )
    assert "10 years" in message
    refused(capsys, "grant", "ag_v", "shell", "--arg", "n=max:1e999", "--store", store)
    refused(capsys, "grant", "ag_v", "shell", "--arg", "n=min:nan", "--store", store)
    assert events(store, "ag_v", capsys) == before
    assert call("scope", "ag_v", "--store", store) == 0
    # ten years is the most, and it is accepted
    assert call("grant", "ag_v", "shell", "--valid-for", "3650d", "--store", store) == 0
    assert call("scope", "ag_v", "--store", store) == 0
    assert events(store, "ag_v", capsys) == before + 1


def test_an_approval_for_ever_is_refused(capsys: pytest.CaptureFixture[str], store: str) -> None:
    message = refused(capsys, "approve", "ap_x", "--valid-for", "99999999999999d", "--store", store)
    assert "10 years" in message


def test_a_far_future_time_already_stored_does_not_break_trace_or_scope() -> None:
    from stead.governance.grants import describe

    text = describe({"tool": "shell", "args": {}, "valid_until": 1e19, "max_uses": None})
    assert "1e+19" in text


# -- ids and tenants -----------------------------------------------------------------------


def test_a_duplicate_id_is_bad_input(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_agent(tmp_path, [{"finish": "ok"}])
    assert call("run", str(path), "--id", "ag_1", "--store", store) == 0
    capsys.readouterr()
    refused(capsys, "run", str(path), "--id", "ag_1", "--store", store, needle="already exists")


# -- numbers that must be positive ---------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["work", "--concurrency", "0"],
        ["work", "--concurrency", "-3"],
        ["work", "--in-flight", "0"],
        ["work", "--hibernate-after", "-5"],
        ["work", "--hibernate-after", "nan"],
        ["work", "--poll", "0"],
        ["resume", "ag_x", "--max-steps", "0"],
    ],
)
def test_counts_and_durations_must_make_sense(
    store: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    refused(capsys, *argv, "--store", store)


@pytest.mark.parametrize("steps", ["0", "-1"])
def test_max_steps_below_one_leaves_no_running_agent(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], steps: str
) -> None:
    path = write_agent(tmp_path, [{"finish": "ok"}])
    refused(capsys, "run", str(path), "--max-steps", steps, "--store", store)
    assert agent_ids(store, capsys) == []


# -- the store file ------------------------------------------------------------------------


def make_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    db = tmp_path / "real" / "stead.db"
    assert call("ls", "--store", f"sqlite:///{db}") == 2  # a read makes nothing
    assert not db.parent.exists()
    capsys.readouterr()
    Runtime(f"sqlite:///{db}", tmp_path / "data").close()
    return db


def foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE recipes (name TEXT)")
    db.commit()
    db.close()


@pytest.mark.parametrize("kind", ["garbage", "truncated", "foreign", "empty-dir"])
def test_a_file_that_is_not_a_stead_store_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = tmp_path / "x.db"
    if kind == "garbage":
        path.write_bytes(b"not a database at all\n" * 200)
    elif kind == "truncated":
        real = make_store(tmp_path, capsys)
        path.write_bytes(real.read_bytes()[:1000])
    elif kind == "foreign":
        foreign(path)
    else:
        path.mkdir()
    before = path.read_bytes() if path.is_file() else None
    for argv in (["ls"], ["show", "ag_x"], ["work"]):
        refused(capsys, *argv, "--store", f"sqlite:///{path}", needle=str(path))
    assert (path.read_bytes() if path.is_file() else None) == before


@contextlib.contextmanager
def read_only(db: Path) -> Iterator[None]:
    """Make the store file and its folder unwritable, even for root.

    Mode bits do not bind root, so as root the files are made immutable
    (``chattr +i``), which binds everyone; as anyone else, ``chmod`` does.
    """
    if os.geteuid() != 0:
        db.chmod(0o444)
        db.parent.chmod(0o555)
        try:
            yield
        finally:
            db.parent.chmod(0o755)
            db.chmod(0o644)
        return
    chattr = shutil.which("chattr")
    done = chattr is not None and (
        subprocess.run([chattr, "+i", str(db), str(db.parent)], capture_output=True).returncode == 0
    )
    if not done:
        why = "running as root, and chattr +i cannot make the store immutable here"
        missing(why, "run the read-only store test")
    assert chattr is not None
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(db), str(db.parent)], check=True)


def test_a_read_only_store_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = make_store(tmp_path, capsys)
    (db.parent / "stead.db-wal").unlink(missing_ok=True)
    (db.parent / "stead.db-shm").unlink(missing_ok=True)
    before = db.read_bytes()
    with read_only(db):
        refused(capsys, "ls", "--store", f"sqlite:///{db}", needle="stead store")
    assert db.read_bytes() == before


def test_a_locked_store_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "locked.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE t (x)")
    monkeypatch.setattr(sqlite_open, "BUSY_TIMEOUT_MS", 50)
    try:
        refused(capsys, "ls", "--store", f"sqlite:///{db}", needle="locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_read_command_makes_no_store_and_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'nonexistent_dir' / 'sub' / 'x.db'}"
    for argv in (["show", "ag_x"], ["ls"], ["trace", "ag_x"], ["scope", "ag_x"]):
        refused(capsys, *argv, "--store", url, needle="no store at")
    assert list(tmp_path.iterdir()) == []


def test_a_read_command_makes_no_store_of_an_empty_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "x.db"
    empty.touch()
    for argv in (["ls"], ["show", "ag_x"]):
        refused(capsys, *argv, "--store", f"sqlite:///{empty}", needle="no store at")
    assert empty.read_bytes() == b""


# -- files and values ----------------------------------------------------------------------


def test_a_policy_file_that_is_not_utf8_is_refused(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_bytes("permit(principal, action, resource);".encode("utf-16"))
    refused(capsys, "policy", "set", str(policy), "--store", store, needle="not UTF-8")


def test_a_huge_secret_is_refused_and_not_stored(
    store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEAD_SECRET_KEY", base64.b64encode(b"k" * 32).decode())
    monkeypatch.setattr(sys, "stdin", io.StringIO("x" * (65 * 1024)))
    refused(capsys, "secret", "set", "BIG", "--store", store, needle="longer than 64")
    monkeypatch.setattr(sys, "stdin", io.StringIO("x" * 100))
    assert call("secret", "set", "SMALL", "--store", store) == 0
    code, names = run_json(capsys, "secret", "ls", "--store", store)
    assert code == 0 and "SMALL" in str(names) and "BIG" not in str(names)


def test_an_argument_that_is_not_unicode_is_refused(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused(capsys, "show", "ag_\udcff", "--store", store, needle="not UTF-8")


def test_markup_in_input_is_shown_as_written(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    message = refused(capsys, "run", str(tmp_path / "[bold]missing[/].yaml"), "--store", store)
    assert "[bold]missing[/]" in message


# -- the reader going away -----------------------------------------------------------------


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    path = write_agent(tmp_path, [{"remember": {"k": "v" * 500}}] * 40 + [{"finish": "ok"}])
    assert call("run", str(path), "--id", "ag_p", "--store", store, "--json") == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "stead", "trace", "ag_p", "--json", "--store", store],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    proc.wait(timeout=120)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert proc.returncode in (0, 1)
