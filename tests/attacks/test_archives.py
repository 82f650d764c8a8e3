"""Boundary: archives (docs/security.md).

An archive is a file anyone can write, and anyone can sign: a signature proves
only that it matches the key it carries. What must never happen: a damaged,
truncated, rewritten or newer-format archive is imported; a workspace path, a
blob name or a tenant in it (or in a snapshot or a stored manifest) leads
outside its folder; anything is written before the whole archive is verified;
an import trusts an exporter the operator's trust list does not name.

The path attack: take a real archive, rewrite its journal so that a workspace
file is named ``../../…/outside/pwned.txt``, re-hash the chain, re-fold the
state and re-sign the header with a fresh Ed25519 key whose public half the
rewritten journal names. Every checksum and the signature then hold, so only
the path check stands between the archive and a file written anywhere on the
host. The same re-signed archive is what a trust list must refuse: so export
and import always say which key signed an archive, an import with a trust list
refuses any other key before writing anything, and an import without one says
loudly that its signer is on no list.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock
from stead.canonical import dumps
from stead.errors import ArchiveError, PathEscape
from stead.governance.identity import new_key_pair
from stead.journal import Event, Kind, event_hash
from stead.sandbox.paths import check_manifest, check_relative
from stead.sandbox.workspace import Workspace
from stead.snapshots.archive import HEADER, read_archive, write_archive
from stead.snapshots.hibernation import manifest_digest, unpack
from stead.snapshots.trust import ENV, TrustedKeys
from stead.state import fold
from stead.store.base import SnapshotRecord
from stead.store.blobs import BlobStore

from ..cli.test_governance_cli import run_json, run_text, write_agent
from ..governance.agents import make_agent, runtime_at
from ..snapshots.test_lineage import waiting_agent

SCRIPT = [
    {"tool": "write_file", "args": {"path": "out.txt", "content": "hello"}},
    {"wait_for_input": "more?"},
    {"finish": "done"},
]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vault key (an export signs with the agent's key), and no trust list from outside."""
    from stead.sandbox.secrets import new_key

    monkeypatch.setenv("STEAD_SECRET_KEY", new_key())
    monkeypatch.delenv(ENV, raising=False)


def rehashed(events: list[Event]) -> list[Event]:
    """The same events with their chain recomputed, as an attacker would."""
    out: list[Event] = []
    prev = events[0].prev_hash
    for e in events:
        h = event_hash(e.agent_id, e.seq, e.kind, e.at, dumps(dict(e.data)), prev)
        out.append(Event(e.agent_id, e.seq, e.kind, e.at, e.data, prev, h, e.epoch))
        prev = h
    return out


def forged(archive: Path, out: Path, rename: dict[str, str], header: dict[str, Any]) -> str:
    """Rewrite ``archive`` into ``out`` with workspace paths renamed; return the new key."""
    original = read_archive(archive)
    private, public = new_key_pair()
    events = []
    for e in original.events:
        data = dict(e.data)
        if e.kind == Kind.IDENTITY_CREATED:
            data["public_key"] = public
        for field in ("changed", "manifest"):
            if isinstance(data.get(field), dict):
                data[field] = {rename.get(p, p): h for p, h in data[field].items()}
        events.append(Event(e.agent_id, e.seq, e.kind, e.at, data, e.prev_hash, e.hash, e.epoch))
    events = rehashed(events)
    state = fold(events)
    fields = {
        k: v
        for k, v in {**original.header, **header}.items()
        if k not in ("format", "version", "parts", "signature")
    }
    fields.update(head_hash=state.head_hash, public_key=public)
    write_archive(out, fields, events, state, original.blobs.__getitem__, private)
    return public


def test_a_re_signed_archive_with_a_traversal_path_is_refused_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: None
) -> None:
    store = f"sqlite:///{tmp_path / 'db' / 'stead.db'}"
    spec = write_agent(tmp_path, SCRIPT)
    code, out, _ = run_text(capsys, "run", str(spec), "--id", "ag_src", "--store", store)
    assert code == 3, out
    archive = tmp_path / "a.stead"
    code, _, err = run_text(capsys, "export", "ag_src", "-o", str(archive), "--store", store)
    assert code == 0, err

    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "pwned.txt"
    other_db = tmp_path / "other" / "stead.db"
    other = f"sqlite:///{other_db}"
    attacks = {
        "dotdot": "../" * 40 + str(target).lstrip("/"),
        "absolute": str(target),
        "backslash": "..\\..\\" * 20 + "outside\\pwned.txt",
        "dot": "./out.txt",
        "empty": "a//out.txt",
        "nul": "out\x00.txt",
    }
    for name, path in attacks.items():
        bad = tmp_path / f"{name}.stead"
        forged(archive, bad, {"out.txt": path}, {})
        code, _, err = run_text(capsys, "import", str(bad), "--store", other)
        assert code == 2, (name, err)
        assert "not a plain relative path" in err and "nothing was imported" in err, err
        assert not target.exists(), name
        assert list(outside.iterdir()) == []
    # a tenant is a folder name too: one that climbs out is refused the same way
    bad = tmp_path / "tenant.stead"
    head = read_archive(archive).header["agent"]
    for tenant in ("../../outside", "Acme Corp", ".hidden", "t" * 500):
        forged(archive, bad, {}, {"agent": {**head, "tenant": tenant}})
        code, _, err = run_text(capsys, "import", str(bad), "--store", other)
        assert code == 2 and "tenant" in err, err
        assert list(outside.iterdir()) == []
    # a header whose agent is not a mapping is damage, not a crash
    forged(archive, bad, {}, {"agent": "x"})
    code, _, err = run_text(capsys, "import", str(bad), "--store", other)
    assert code != 0 and "does not describe the agent" in err and "Traceback" not in err, err
    # nothing at all was stored in the importing store's data folder
    data = other_db.parent
    assert not [p for p in data.rglob("*") if p.is_file() and p.parent != data]
    # the untouched archive still imports
    code, _, err = run_text(capsys, "import", str(archive), "--store", other)
    assert code == 0, err


@pytest.mark.parametrize(
    "rel",
    [
        "",
        "/etc/passwd",
        "..",
        "../x",
        "a/../../x",
        "a/..",
        ".",
        "./a",
        "a/./b",
        "a//b",
        "a/",
        "/",
        "a\x00b",
        "..\\x",
        "a\\..\\..\\x",
        "\\\\server\\share",
        "a\\",
    ],
)
def test_only_plain_relative_paths_pass(rel: str) -> None:
    with pytest.raises(PathEscape, match="not a plain relative path"):
        check_relative(rel)


@pytest.mark.parametrize("rel", ["a", "a/b.txt", ".hidden", "a/.b/..c", "x..y", "é/ü", "a\\b"])
def test_plain_relative_paths_pass(rel: str) -> None:
    assert check_relative(rel) == rel


def test_a_manifest_names_files_by_path_and_content_by_sha256() -> None:
    good = hashlib.sha256(b"x").hexdigest()
    check_manifest({"a/b": good}, "here")
    with pytest.raises(PathEscape, match=r"here: .*'\.\./b'"):
        check_manifest({"a": good, "../b": good}, "here")
    with pytest.raises(PathEscape, match="not a SHA-256"):
        check_manifest({"a": "../../../etc/passwd"}, "here")
    with pytest.raises(PathEscape, match="not a SHA-256"):
        check_manifest({"a": 3}, "here")  # type: ignore[dict-item]


def test_restore_refuses_a_traversal_manifest_before_writing_anything(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    digest = blobs.put(b"pwned")
    ws = Workspace(tmp_path / "deep" / "ws", blobs)
    outside = tmp_path / "deep" / "x.txt"
    with pytest.raises(PathEscape, match="not a plain relative path"):
        ws.restore({"ok.txt": digest, "../x.txt": digest})
    assert not outside.exists()
    assert not (ws.root / "ok.txt").exists()  # refused whole, before any file is written
    with pytest.raises(PathEscape):
        ws._make_room("../y.txt")  # the writing path checks again, on its own


def test_a_snapshot_whose_manifest_leaves_the_workspace_is_not_restored(tmp_path: Path) -> None:
    """A store edited to name a traversal path in a snapshot is refused at restore."""
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(rt, tmp_path, [{"wait_for_input": "x"}])
    digest = rt.blobs("default").put(b"pwned")
    manifest = {"../../../../outside.txt": digest}
    snap = SnapshotRecord(
        "snap_x", agent, "default", 1, manifest, manifest_digest(manifest), 1, 5, 5, 0.0
    )
    with rt.hold(agent) as act, pytest.raises(PathEscape, match="snapshot snap_x"):
        unpack(act, snap)
    assert not list(tmp_path.rglob("outside.txt"))
    rt.close()


# -- who signed it: trust lists ---------------------------------------------------------------


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


@pytest.mark.usefixtures("key")
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


@pytest.mark.usefixtures("key")
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

    # the path attack above: the same archive, re-signed with a fresh key
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


@pytest.mark.usefixtures("key")
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
@pytest.mark.usefixtures("key")
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


@pytest.mark.usefixtures("key")
def test_trusted_keys_in_the_library() -> None:
    assert TrustedKeys.configured(environ={}) is None
    signer = new_key_pair()[1]
    listed = TrustedKeys.configured([signer], environ={})
    assert listed is not None and listed.keys == {signer}
    listed.check(Path("x"), signer)


# -- damaged, truncated, rewritten and newer archives -----------------------------------------


def members(raw: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The magic line and members of an archive, by the framing docs/… describe."""
    first = raw.index(b"\n") + 1
    out, at = [], first
    end_of_members = raw.rindex(b"sha256 ")
    while at < end_of_members:
        nl = raw.index(b"\n", at)
        name, size = raw[at:nl].decode().rsplit(" ", 1)
        out.append((name, raw[nl + 1 : nl + 1 + int(size)]))
        at = nl + 1 + int(size) + 1
    return raw[:first], out


def rebuild(magic: bytes, parts: list[tuple[str, bytes]]) -> bytes:
    body = magic + b"".join(f"{n} {len(d)}\n".encode() + d + b"\n" for n, d in parts)
    return body + f"sha256 {hashlib.sha256(body).hexdigest()}\n".encode()


@pytest.mark.parametrize("where", ["magic", "header", "journal", "state", "blob", "framing", "end"])
def test_a_flipped_byte_anywhere_is_refused_and_the_store_is_unchanged(
    tmp_path: Path, where: str
) -> None:
    rt = runtime_at(tmp_path / "a", FakeClock())
    agent = waiting_agent(rt, tmp_path / "a")
    archive = tmp_path / "agent.stead"
    rt.export(agent, archive)
    raw = archive.read_bytes()
    offsets = {
        "magic": 3,
        "header": raw.index(b'"archive_id"') + 16,
        "journal": raw.index(b"\njournal.jsonl.zst ") + 40,
        "state": raw.index(b"\nstate.json.zst ") + 30,
        "blob": raw.index(b"\nblobs/") + 90,
        "framing": raw.index(b"\nstate.json.zst ") + len(b"\nstate.json.zst "),
        "end": len(raw) - 5,
    }
    data = bytearray(raw)
    data[offsets[where]] ^= 0x01
    archive.write_bytes(bytes(data))
    other = runtime_at(tmp_path / "b", FakeClock())
    with pytest.raises(ArchiveError, match=r"not a stead archive|checksum"):
        other.import_archive(archive)
    assert other.store.list_agents() == []
    assert not list((tmp_path / "b" / "data").rglob("blobs/*/*/*"))


def test_truncated_tampered_and_future_archives_are_refused_with_reasons(
    tmp_path: Path,
) -> None:
    rt = runtime_at(tmp_path / "a", FakeClock())
    agent = waiting_agent(rt, tmp_path / "a")
    archive = tmp_path / "agent.stead"
    rt.export(agent, archive)
    raw = archive.read_bytes()
    magic, parts = members(raw)
    assert [n for n, _ in parts][:3] == [HEADER, "journal.jsonl.zst", "state.json.zst"]
    assert rebuild(magic, parts) == raw  # the framing is what the module docstring says

    cut = tmp_path / "cut.stead"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ArchiveError, match=r"truncated|checksum"):
        read_archive(cut)

    def rewritten(name: str, change: Any, magic: bytes = magic) -> Path:
        out = tmp_path / name
        new = [
            (n, json.dumps(change(json.loads(d))).encode() if n == HEADER else d) for n, d in parts
        ]
        out.write_bytes(rebuild(magic, new))
        return out

    moved = rewritten("moved.stead", lambda h: {**h, "move": True})
    with pytest.raises(ArchiveError, match="signature does not verify"):
        read_archive(moved)
    swapped = tmp_path / "swapped.stead"
    swapped.write_bytes(
        rebuild(magic, [(n, d + b"x" if n == "state.json.zst" else d) for n, d in parts])
    )
    with pytest.raises(ArchiveError, match=r"state.json.zst does not match its checksum"):
        read_archive(swapped)
    future = rewritten("future.stead", lambda h: h, magic=b"stead-archive 2\n")
    with pytest.raises(ArchiveError, match=r"format version 2.*upgrade stead"):
        read_archive(future)
    with pytest.raises(ArchiveError, match="no archive"):
        read_archive(tmp_path / "missing.stead")


@pytest.mark.usefixtures("key")
def test_an_archive_s_spec_never_imports_from_the_data_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second of two chained imports: its tools found in the first one's workspace."""
    archive, _ = exported(tmp_path, capsys)
    db = tmp_path / "other" / "stead.db"
    agent = read_archive(archive).header["agent"]
    for i, folder in enumerate([db.parent, db.parent / "workspaces" / "default" / "ag_first"]):
        out = tmp_path / f"chained{i}.stead"
        spec = {**agent["spec"], "base_dir": str(folder)}
        forged(archive, out, {}, {"agent": {**agent, "spec": spec}})
        code, _, err = run_text(capsys, "import", str(out), "--store", f"sqlite:///{db}")
        assert code == 2 and "data folder" in err, err
    assert nothing_stored(db)
