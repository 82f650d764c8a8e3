"""The transactional workspace (scan, diff, restore) and path confinement."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from stead.errors import PathEscape
from stead.sandbox.paths import resolve_inside
from stead.sandbox.workspace import Delta, Workspace, diff
from stead.store.blobs import BlobStore


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    w = Workspace(tmp_path / "ws", BlobStore(tmp_path / "blobs"))
    w.create()
    return w


def write(ws: Workspace, rel: str, data: bytes) -> None:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes, and every symlink marked as one.

    Folders are not listed: a manifest records files, so an empty folder is not
    part of what restore promises to put back.
    """
    out: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = b"<symlink>"
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out


SEED = {
    "README.md": b"# hello\n",
    "src/app.py": b"print('hi')\n",
    "src/util/helpers.py": b"def f():\n    return 1\n",
    "data/blob.bin": bytes(range(256)),
    "data/empty.txt": b"",
}


def seeded(ws: Workspace) -> dict[str, str]:
    for rel, data in SEED.items():
        write(ws, rel, data)
    return ws.scan()


# -- scan and diff ---------------------------------------------------------------------


def test_scan_maps_every_file_to_its_hash_and_stores_its_content(ws: Workspace) -> None:
    manifest = seeded(ws)
    assert manifest == {rel: sha(data) for rel, data in SEED.items()}
    for rel, digest in manifest.items():
        assert ws.blobs.get(digest) == SEED[rel]


def test_scan_of_a_missing_folder_is_empty(tmp_path: Path) -> None:
    assert Workspace(tmp_path / "nope", BlobStore(tmp_path / "b")).scan() == {}


def test_scan_sees_a_rewrite_with_the_same_size(ws: Workspace) -> None:
    write(ws, "a.txt", b"aaaa")
    first = ws.scan()
    write(ws, "a.txt", b"bbbb")
    assert ws.scan() == {"a.txt": sha(b"bbbb")} != first


def _hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the files the workspace module hashes from here on."""
    import stead.sandbox.workspace as module

    calls: list[int] = []
    real = hashlib.sha256

    def counting(data: bytes = b"") -> Any:
        calls.append(len(data))
        return real(data)

    monkeypatch.setattr(module.hashlib, "sha256", counting)
    return calls


def test_files_written_from_blobs_are_not_hashed_again_by_the_next_scan(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = seeded(ws)
    fresh = Workspace(tmp_path / "fresh", ws.blobs)
    fresh.restore(manifest)
    hashed = _hashes(monkeypatch)
    assert fresh.scan() == manifest
    assert hashed == []  # the restore recorded what it wrote
    # the same holds for a folder built aside and moved in
    live = Workspace(tmp_path / "live", ws.blobs)
    live.create()
    (live.root / "stale.txt").write_bytes(b"left over")
    live.take_over(fresh)
    assert not fresh.root.exists() and tree(live.root) == SEED
    assert live.scan() == manifest and hashed == []


def test_a_restored_file_rewritten_at_once_with_the_same_size_is_seen(
    ws: Workspace, tmp_path: Path
) -> None:
    """The hashes a restore records never hide a write that follows it, however soon."""
    manifest = seeded(ws)
    fresh = Workspace(tmp_path / "fresh", ws.blobs)
    fresh.restore(manifest)
    (fresh.root / "README.md").write_bytes(b"# HELLO\n")  # same size, same instant
    assert fresh.scan()["README.md"] == sha(b"# HELLO\n")
    staging = Workspace(tmp_path / "staging", ws.blobs)
    staging.restore(manifest)
    live = Workspace(tmp_path / "live", ws.blobs)
    live.take_over(staging)
    (live.root / "src" / "app.py").write_bytes(b"print('HI')\n")
    assert live.scan()["src/app.py"] == sha(b"print('HI')\n")


def test_scan_ignores_symlinks(ws: Workspace, tmp_path: Path) -> None:
    write(ws, "a.txt", b"a")
    (tmp_path / "outside.txt").write_bytes(b"secret")
    os.symlink(tmp_path / "outside.txt", ws.root / "link.txt")
    assert ws.scan() == {"a.txt": sha(b"a")}


def test_diff_names_changed_created_and_removed_paths() -> None:
    old = {"same": "1", "edited": "2", "gone": "3"}
    new = {"same": "1", "edited": "22", "born": "4"}
    d = diff(old, new)
    assert d == Delta(changed={"edited": "22", "born": "4"}, removed=["gone"])
    assert d.paths() == ["born", "edited", "gone"]
    assert d
    assert not diff(old, dict(old))


# -- restore ---------------------------------------------------------------------------


def test_restore_puts_back_modified_created_and_deleted_files(ws: Workspace) -> None:
    manifest = seeded(ws)
    committed = tree(ws.root)
    # a step that died half-way:
    write(ws, "src/app.py", b"print('half-written")  # modified
    write(ws, "data/blob.bin", b"")  # modified to empty
    write(ws, "new.txt", b"created")  # created
    write(ws, "brand/new/deep.txt", b"created deep")  # created in new folders
    (ws.root / "README.md").unlink()  # deleted
    (ws.root / "src/util/helpers.py").unlink()  # deleted, leaving its folder empty
    (ws.root / "src/util").rmdir()

    delta = ws.restore(manifest)

    assert tree(ws.root) == committed
    assert ws.scan() == manifest
    assert delta.paths() == [
        "README.md",
        "brand/new/deep.txt",
        "data/blob.bin",
        "new.txt",
        "src/app.py",
        "src/util/helpers.py",
    ]
    assert sorted(delta.removed) == ["README.md", "src/util/helpers.py"]
    assert set(delta.changed) == {"brand/new/deep.txt", "data/blob.bin", "new.txt", "src/app.py"}


def test_restore_of_an_unchanged_workspace_changes_nothing(ws: Workspace) -> None:
    manifest = seeded(ws)
    (ws.root / "keep-me").mkdir()
    before = tree(ws.root)
    delta = ws.restore(manifest)
    assert not delta
    assert tree(ws.root) == before


def test_restore_rebuilds_a_deleted_workspace_from_blobs(ws: Workspace) -> None:
    manifest = seeded(ws)
    committed = tree(ws.root)
    for p in sorted(ws.root.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    ws.root.rmdir()
    delta = ws.restore(manifest)
    assert tree(ws.root) == committed
    assert sorted(delta.removed) == sorted(SEED)


def test_restore_to_an_empty_manifest_empties_the_workspace(ws: Workspace) -> None:
    seeded(ws)
    delta = ws.restore({})
    assert tree(ws.root) == {}
    assert sorted(delta.changed) == sorted(SEED)


def test_restore_when_a_file_was_replaced_by_a_folder(ws: Workspace) -> None:
    write(ws, "out", b"a file")
    manifest = ws.scan()
    (ws.root / "out").unlink()
    write(ws, "out/inside.txt", b"now a folder")
    delta = ws.restore(manifest)
    assert tree(ws.root) == {"out": b"a file"}
    assert delta.paths() == ["out", "out/inside.txt"]


def test_restore_when_a_folder_was_replaced_by_a_file(ws: Workspace) -> None:
    write(ws, "out/inside.txt", b"in a folder")
    manifest = ws.scan()
    (ws.root / "out/inside.txt").unlink()
    (ws.root / "out").rmdir()
    write(ws, "out", b"now a file")
    ws.restore(manifest)
    assert tree(ws.root) == {"out/inside.txt": b"in a folder"}


def test_restore_never_writes_through_a_symlink_out_of_the_workspace(
    ws: Workspace, tmp_path: Path
) -> None:
    write(ws, "sub/f.txt", b"committed")
    manifest = ws.scan()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_bytes(b"not the agent's")
    # a dying step replaced the folder with a link to somewhere else
    (ws.root / "sub/f.txt").unlink()
    (ws.root / "sub").rmdir()
    os.symlink(outside, ws.root / "sub")

    ws.restore(manifest)

    assert (outside / "f.txt").read_bytes() == b"not the agent's"
    assert tree(ws.root) == {"sub/f.txt": b"committed"}
    assert not (ws.root / "sub").is_symlink()


def test_restore_removes_a_symlink_the_manifest_does_not_have(
    ws: Workspace, tmp_path: Path
) -> None:
    write(ws, "a.txt", b"a")
    manifest = ws.scan()
    (tmp_path / "secret").write_bytes(b"secret")
    os.symlink(tmp_path / "secret", ws.root / "peek")
    ws.restore(manifest)
    assert tree(ws.root) == {"a.txt": b"a"}


# -- confinement -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel", ["../x", "..", "a/../../x", "sub/../../ws2/x", "/etc/passwd", "/", "", "a\x00b"]
)
def test_resolve_inside_refuses_escapes(tmp_path: Path, rel: str) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    with pytest.raises(PathEscape):
        resolve_inside(root, rel)


@pytest.mark.parametrize(
    ("rel", "expected"),
    [("a.txt", "a.txt"), ("sub/b.txt", "sub/b.txt"), ("sub/../c.txt", "c.txt"), (".", "")],
)
def test_resolve_inside_accepts_paths_inside(tmp_path: Path, rel: str, expected: str) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    assert resolve_inside(root, rel) == (root / expected).resolve()


def test_resolve_inside_refuses_a_symlink_pointing_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", root / "innocent.txt")
    os.symlink(tmp_path, root / "door")
    with pytest.raises(PathEscape):
        resolve_inside(root, "innocent.txt")
    with pytest.raises(PathEscape):
        resolve_inside(root, "door/secret.txt")


def test_resolve_inside_allows_a_symlink_that_stays_inside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "real").mkdir(parents=True)
    os.symlink(root / "real", root / "alias")
    assert resolve_inside(root, "alias/x.txt") == (root / "real" / "x.txt").resolve()


def test_workspace_resolve_uses_the_same_rules(ws: Workspace) -> None:
    assert ws.resolve("a/b.txt") == (ws.root / "a" / "b.txt").resolve()
    with pytest.raises(PathEscape):
        ws.resolve("../escape.txt")
