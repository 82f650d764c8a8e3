"""The transactional workspace (scan, diff, restore) and path confinement."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pytest
from tests.needs import missing

from stead.errors import PathEscape, WorkspaceFull
from stead.sandbox.paths import check_relative, resolve_inside
from stead.sandbox.workspace import Delta, Quota, Workspace, diff
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


# -- names no workspace path can hold (issue 25) ---------------------------------------

BAD = os.fsdecode(b"bad\xffname")  # bytes that are not UTF-8, as Python sees them


def _plant(root: Path, raw: bytes, data: bytes = b"x") -> None:
    path = os.fsencode(root) + b"/" + raw
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)


def _deep(root: Path, levels: int) -> None:
    """A chain of ``levels`` folders ``d/d/…`` with a file at the bottom, made the
    way a command makes it: one step at a time, past any path the host could name."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with os.fdopen(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as fh:
            fh.write(b"deep")
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("rel", "why"),
    [
        ("..\\x", "'..' component"),
        ("a/..\\..\\y", "'..' component"),
        (BAD, "not UTF-8"),
        (("x" * 255 + "/") * 4 + "f", "longer than 1024 bytes"),
        ("d/" * 64 + "f", "more than 64 levels deep"),
        ("x" * 256, "longer than 255 bytes"),
    ],
)
def test_the_one_rule_refuses_what_no_restore_could_write(rel: str, why: str) -> None:
    with pytest.raises(PathEscape, match=re.escape(why)):
        check_relative(rel)


def test_the_one_rule_keeps_the_longest_plain_names() -> None:
    longest = "/".join(["x" * 255] * 4)  # 1023 bytes
    for rel in ("x" * 255, "d/" * 63 + "f", "a\\b", "é/ü.txt", longest, longest[:-2] + "é"):
        assert check_relative(rel) == rel


def test_a_strict_scan_refuses_a_bad_name_and_a_plain_one_leaves_it_out(ws: Workspace) -> None:
    write(ws, "ok.txt", b"ok")
    _plant(ws.root, b"sub/bad\xffname")
    write(ws, "..\\x", b"climb")
    with pytest.raises(PathEscape, match=re.escape("'..\\\\x'")):
        ws.scan(Quota(2**20, 100))
    assert ws.scan() == {"ok.txt": sha(b"ok")}
    assert sorted(ws.refused) == ["..\\x", "sub/bad\\xffname"]


def test_a_strict_scan_stops_at_its_quota_of_files_before_hashing_the_rest(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3000):
        (ws.root / f"f{i}").touch()
    hashed = _hashes(monkeypatch)
    with pytest.raises(WorkspaceFull, match="more than 100 files and folders"):
        ws.scan(Quota(2**30, 100))
    assert len(hashed) <= 100
    assert len(ws.scan()) == 3000  # without a quota, the scan sees them all


def test_a_strict_scan_refuses_what_lies_deeper_than_a_path_may_go(ws: Workspace) -> None:
    _deep(ws.root, 300)
    with pytest.raises(PathEscape, match="more than 64 levels deep"):
        ws.scan(Quota(2**20, 10_000))
    assert ws.scan() == {} and ws.refused == ["d/" * 63 + "d"]


def test_restore_removes_every_file_no_path_names_and_journals_it_as_text(
    ws: Workspace,
) -> None:
    write(ws, "keep.txt", b"kept")
    manifest = ws.scan()
    _plant(ws.root, b"sub/bad\xffname")
    write(ws, "..\\x", b"climb")
    _deep(ws.root, 2000)  # deeper than a path, a descriptor per level or recursion reach
    delta = ws.restore(manifest)
    assert delta.paths() == ["..\\x", "d/" * 63 + "d", "sub/bad\\xffname"]
    assert os.listdir(ws.root) == ["keep.txt"]
    assert ws.scan() == manifest


def test_restore_writes_a_name_as_long_as_a_name_can_be(ws: Workspace, tmp_path: Path) -> None:
    write(ws, "x" * 255, b"long")
    manifest = ws.scan()
    fresh = Workspace(tmp_path / "fresh", ws.blobs)
    fresh.restore(manifest)
    assert tree(fresh.root) == {"x" * 255: b"long"}


def test_take_over_replaces_a_folder_nested_past_any_path(ws: Workspace, tmp_path: Path) -> None:
    _deep(ws.root, 2000)
    staging = Workspace(tmp_path / "staging", ws.blobs)
    staging.restore({})
    ws.take_over(staging)
    assert os.listdir(ws.root) == []


SHUT = """
import os, sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from stead.sandbox.workspace import Quota, Workspace
from stead.store.blobs import BlobStore

base = Path(sys.argv[1])
ws = Workspace(base / "ws", BlobStore(base / "blobs"))
ws.create()
(ws.root / "keep.txt").write_text("k")
manifest = ws.scan()

def shut():
    for name, mode in (("shut", 0), ("readonly", 0o500)):
        (ws.root / name).mkdir()
        (ws.root / name / "f").write_text(name)
        os.chmod(ws.root / name, mode)
    (ws.root / "secret").write_text("s")
    os.chmod(ws.root / "secret", 0)

shut()
assert sorted(ws.scan(Quota(2**20, 100))) == ["keep.txt", "readonly/f", "secret", "shut/f"]
assert ws.restore(manifest).paths() == ["readonly/f", "secret", "shut/f"]
assert os.listdir(ws.root) == ["keep.txt"]
shut()
staging = Workspace(base / "staging", ws.blobs)
staging.restore(manifest)
ws.take_over(staging)
assert os.listdir(ws.root) == ["keep.txt"]
"""


def test_what_a_command_shut_with_chmod_is_seen_and_removed_all_the_same() -> None:
    """A command runs as the worker's user, so it can shut a file or folder to it:
    the scan after a call still sees what it holds (it was left out of the
    manifest without a word), and a restore or a wake still removes it (a
    folder without write permission made the restore fail)."""
    import shutil
    import subprocess
    import sys
    import tempfile

    import stead

    argv = [sys.executable, "-c", SHUT]
    if os.geteuid() == 0:  # root reads everything: look as a plain user does
        if shutil.which("setpriv") is None:
            missing("no setpriv to run as a plain user", "check chmod in a workspace")
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    base = tempfile.mkdtemp(prefix="stead-shut-")
    os.chmod(base, 0o777)
    try:
        src = str(Path(stead.__file__).parent.parent)
        done = subprocess.run([*argv, base, src], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", base], check=False)
        shutil.rmtree(base, ignore_errors=True)


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
