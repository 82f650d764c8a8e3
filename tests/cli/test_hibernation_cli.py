"""The hibernation commands in-process on a SQLite store: hibernate, snapshots, restore,
wake, send to a hibernated agent, fork, export and import, with JSON and exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_governance_cli import run_json, run_text, workspace_file, write_agent

SCRIPT = [
    {"tool": "write_file", "args": {"path": "out.txt", "content": "hello"}},
    {"wait_for_input": "more?"},
    {"tool": "read_file", "args": {"path": "out.txt"}},
    {"wait_for_input": "again?"},
    {"finish": "done"},
]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'db' / 'stead.db'}"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    from stead.sandbox.secrets import new_key

    monkeypatch.setenv("STEAD_SECRET_KEY", new_key())


def waiting(tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]) -> str:
    spec = write_agent(tmp_path, SCRIPT)
    code, _, _ = run_text(capsys, "run", str(spec), "--id", "ag_h", "--store", store)
    assert code == 3
    return "ag_h"


def test_hibernate_snapshots_restore_once(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = waiting(tmp_path, store, capsys)
    code, snap = run_json(capsys, "hibernate", agent, "--store", store)
    assert code == 0 and snap["snapshot_id"].startswith("snap_") and snap["consumed"] is False
    assert not workspace_file(tmp_path, agent, "out.txt").exists()
    code, shown = run_json(capsys, "show", agent, "--store", store)
    assert shown["status"] == "hibernated"
    code, snaps = run_json(capsys, "snapshots", agent, "--store", store)
    assert [s["snapshot_id"] for s in snaps] == [snap["snapshot_id"]]

    code, out, _ = run_text(capsys, "restore", snap["snapshot_id"], "--store", store)
    assert code == 3 and "waiting" in out  # restored; it still waits for its input
    assert workspace_file(tmp_path, agent, "out.txt").read_text() == "hello"
    code, out, err = run_text(capsys, "restore", snap["snapshot_id"], "--store", store)
    assert code == 1 and "already restored" in err and snap["snapshot_id"] in err
    code, snaps = run_json(capsys, "snapshots", agent, "--store", store)
    assert snaps[0]["consumed"] is True


def test_a_message_wakes_a_hibernated_agent_and_it_goes_on(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = waiting(tmp_path, store, capsys)
    code, out, _ = run_text(capsys, "hibernate", agent, "--store", store)
    assert code == 0 and out.strip().startswith("snap_")
    code, out, _ = run_text(capsys, "send", agent, "go on", "--store", store)
    assert code == 3 and "again?" in out
    assert workspace_file(tmp_path, agent, "out.txt").exists()
    code, out, _ = run_text(capsys, "hibernate", agent, "--store", store)
    code, out, _ = run_text(capsys, "wake", agent, "--store", store)
    assert code == 3
    code, out, err = run_text(capsys, "wake", agent, "--store", store)
    assert code == 2 and "not hibernated" in err


def test_fork_export_import_from_the_command_line(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], key: None
) -> None:
    agent = waiting(tmp_path, store, capsys)
    code, fork = run_json(capsys, "fork", agent, "--store", store)
    assert code == 0 and fork["agent_id"] != agent and fork["origin"]["agent_id"] == agent
    archive = tmp_path / "a.stead"
    code, done = run_json(capsys, "export", agent, "-o", str(archive), "--move", "--store", store)
    assert code == 0 and done["move"] is True and archive.exists()
    code, shown = run_json(capsys, "show", agent, "--store", store)
    assert shown["status"] == "moved"
    other = f"sqlite:///{tmp_path / 'other' / 'stead.db'}"
    code, imported = run_json(capsys, "import", str(archive), "--store", other)
    assert code == 0 and imported["status"] == "waiting"
    assert imported["origin"]["archive_id"] == done["archive_id"]
    code, _out, err = run_text(capsys, "import", str(archive), "--store", other)
    assert code == 1 and "imported into this store already" in err
    broken = tmp_path / "broken.stead"
    broken.write_bytes(archive.read_bytes()[:-10])
    code, _out, err = run_text(capsys, "import", str(broken), "--store", other)
    assert code == 1 and "checksum" in err
