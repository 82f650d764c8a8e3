"""Paths read from an archive, a snapshot or the store never lead out of the workspace.

The attack: take a real archive, rewrite its journal so that a workspace file
is named ``../../…/outside/pwned.txt``, re-hash the chain, re-fold the state and
re-sign the header with a fresh Ed25519 key whose public half the rewritten
journal names. Every checksum and the signature then hold, so only the path
check stands between the archive and a file written anywhere on the host.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock
from stead.canonical import dumps
from stead.errors import PathEscape
from stead.governance.identity import new_key_pair
from stead.journal import Event, Kind, event_hash
from stead.sandbox.paths import check_manifest, check_relative
from stead.sandbox.workspace import Workspace
from stead.snapshots.archive import read_archive, write_archive
from stead.snapshots.hibernation import manifest_digest, unpack
from stead.state import fold
from stead.store.base import SnapshotRecord
from stead.store.blobs import BlobStore

from ..cli.test_governance_cli import run_text, write_agent
from ..governance.agents import make_agent, runtime_at

SCRIPT = [
    {"tool": "write_file", "args": {"path": "out.txt", "content": "hello"}},
    {"wait_for_input": "more?"},
    {"finish": "done"},
]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    from stead.sandbox.secrets import new_key

    monkeypatch.setenv("STEAD_SECRET_KEY", new_key())


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
