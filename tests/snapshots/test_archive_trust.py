"""Trusting archives: an operator names the exporter keys whose archives an import accepts.

A signature proves only that an archive matches the key it carries; anyone can
re-sign a rewritten archive with a key of their own (see test_archive_paths).
So export and import always say which key signed an archive, an import with a
trust list refuses any other key before writing anything, and an import
without one says loudly that its signer is on no list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stead.governance.identity import new_key_pair
from stead.snapshots.archive import read_archive
from stead.snapshots.trust import ENV, TrustedKeys

from ..cli.test_governance_cli import run_json, run_text, write_agent
from .test_archive_paths import SCRIPT, forged


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    from stead.sandbox.secrets import new_key

    monkeypatch.setenv("STEAD_SECRET_KEY", new_key())
    monkeypatch.delenv(ENV, raising=False)


def exported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """A real archive written by `stead export`, and the key that export says signed it."""
    store = f"sqlite:///{tmp_path / 'db' / 'stead.db'}"
    spec = write_agent(tmp_path, SCRIPT)
    assert run_text(capsys, "run", str(spec), "--id", "ag_src", "--store", store)[0] == 3
    archive = tmp_path / "a.stead"
    code, _, err = run_text(capsys, "export", "ag_src", "-o", str(archive), "--store", store)
    signer = read_archive(archive).header["public_key"]
    assert code == 0 and f"signed with agent ag_src's key {signer}" in err, err
    assert f"--trust-key {signer}" in err
    code, done = run_json(
        capsys, "export", "ag_src", "-o", str(tmp_path / "b.stead"), "--store", store
    )
    assert code == 0 and done["public_key"] == signer
    return archive, signer


def nothing_stored(db: Path) -> bool:
    return not db.parent.exists() or not [
        p for p in db.parent.rglob("*") if p.is_file() and p.parent != db.parent
    ]


def test_without_a_trust_list_import_works_and_says_loudly_who_signed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive, signer = exported(tmp_path, capsys)
    other = f"sqlite:///{tmp_path / 'other' / 'stead.db'}"
    code, _, err = run_text(capsys, "import", str(archive), "--store", other)
    assert code == 0, err
    assert "warning" in err and f"signed by key {signer}" in err and "on no trust list" in err
    assert "--trust-key" in err and ENV in err
    code, imported = run_json(capsys, "import", str(tmp_path / "b.stead"), "--store", other)
    assert code == 0 and imported["signed_by"] == signer and imported["trusted"] is False
    assert imported["origin"]["signed_by"] == signer  # recorded in the new agent's journal


def test_with_trusted_keys_only_archives_signed_by_them_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    archive, signer = exported(tmp_path, capsys)
    stranger = new_key_pair()[1]
    db = tmp_path / "other" / "stead.db"
    other = f"sqlite:///{db}"

    code, _, err = run_text(
        capsys, "import", str(archive), "--store", other, "--trust-key", stranger
    )
    assert code == 2, err
    assert f"signed by key {signer}" in err and "not one of the 1 trusted" in err
    assert f"--trust-key {signer}" in err and "nothing was imported" in err
    assert len(err.strip().splitlines()) == 1
    assert nothing_stored(db)

    # the attack of test_archive_paths: the same archive, re-signed with a fresh key
    resigned = tmp_path / "resigned.stead"
    fresh = forged(archive, resigned, {}, {})
    code, _, err = run_text(
        capsys, "import", str(resigned), "--store", other, "--trust-key", signer
    )
    assert code == 2 and f"signed by key {fresh}" in err, err
    assert nothing_stored(db)

    code, imported = run_json(
        capsys,
        "import",
        str(archive),
        "--store",
        other,
        "--trust-key",
        stranger,
        "--trust-key",
        "ed25519:" + signer.upper(),
    )
    assert code == 0 and imported["signed_by"] == signer and imported["trusted"] is True


def test_a_trusted_keys_file_from_the_environment_or_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    archive, signer = exported(tmp_path, capsys)
    db = tmp_path / "other" / "stead.db"
    other = f"sqlite:///{db}"
    keys = tmp_path / "trusted.keys"
    keys.write_text(f"# our exporters\n\n{new_key_pair()[1]}  bob's laptop\n", encoding="utf-8")
    monkeypatch.setenv(ENV, str(keys))
    code, _, err = run_text(capsys, "import", str(archive), "--store", other)
    assert code == 2 and f"signed by key {signer}" in err and f"add it to {keys}" in err, err
    assert nothing_stored(db)

    with keys.open("a", encoding="utf-8") as fh:
        fh.write(f"{signer}   # the build server\n")
    code, _, err = run_text(capsys, "import", str(archive), "--store", other)
    assert code == 0 and f"signed by key {signer}, a trusted key ({keys})" in err, err
    assert "warning" not in err

    # --trusted-keys names another file, instead of the variable's
    empty = tmp_path / "empty.keys"
    empty.write_text("# nobody yet\n", encoding="utf-8")
    b = str(tmp_path / "b.stead")
    code, _, err = run_text(capsys, "import", b, "--store", other, "--trusted-keys", str(empty))
    assert code == 2 and "not one of the 0 trusted" in err, err


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        ("", [], "set but empty"),
        ("{tmp}/missing.keys", [], "cannot read the trusted archive keys file"),
        ("{tmp}/bad.keys", [], "bad.keys line 2: 'not-a-key' is not an archive key"),
        (None, ["--trust-key", "abc"], "--trust-key: 'abc' is not an archive key"),
        (None, ["--trusted-keys", "{tmp}/missing.keys"], "cannot read"),
    ],
)
def test_a_trust_list_that_cannot_be_read_refuses_every_import(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    env: str | None,
    argv: list[str],
    expected: str,
) -> None:
    """Fail closed: a configured list that is broken never becomes "trust anyone"."""
    (tmp_path / "bad.keys").write_text(f"{'a' * 64}\nnot-a-key\n", encoding="utf-8")
    if env is not None:
        monkeypatch.setenv(ENV, env.format(tmp=tmp_path))
    db = tmp_path / "other" / "stead.db"
    args = [a.format(tmp=tmp_path) for a in argv]
    code, _, err = run_text(capsys, "import", "whatever.stead", "--store", f"sqlite:///{db}", *args)
    assert code == 2 and expected in err, err
    assert not db.exists()


def test_trusted_keys_in_the_library() -> None:
    assert TrustedKeys.configured(environ={}) is None
    signer = new_key_pair()[1]
    listed = TrustedKeys.configured([signer], environ={})
    assert listed is not None and listed.keys == {signer}
    listed.check(Path("x"), signer)
