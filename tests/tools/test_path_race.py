"""The file tools and the workspace scan under a folder that is being swapped for a link.

This replays the second half of the sandbox escape: a process in the
workspace flips an entry between a real folder and a symbolic link to a host
folder while the host side reads, writes, lists and scans. Checking a path
and then opening it let 10 of 300 reads return a host file and let writes
create files in the host folder; the scan crashed on entries that vanished.
The flipping runs in a real separate process, as an escaped command would.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stead.errors import PathEscape
from stead.sandbox.workspace import Workspace
from stead.store.blobs import BlobStore
from stead.tools.base import ToolContext, as_tool
from stead.tools.builtin import BUILTINS

HOST_TEXT = "HOST-SECRET"

FLIPPER = textwrap.dedent(
    """
    import os, sys
    ws = sys.argv[1]
    d, real, link = (os.path.join(ws, n) for n in ("d", "real", "link"))
    while True:
        try:
            os.rename(d, real)   # d was the folder
            os.rename(link, d)   # now it is the link to the host
            os.rename(d, link)
            os.rename(real, d)   # and the folder again
        except OSError:
            pass
    """
)


@pytest.fixture
def racing(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    ws, host = tmp_path / "ws", tmp_path / "host"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "f").write_text("inside", encoding="utf-8")
    host.mkdir()
    (host / "f").write_text(HOST_TEXT, encoding="utf-8")
    (ws / "link").symlink_to(host)
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(ws)])
    try:
        yield ws, host
    finally:
        flipper.kill()
        flipper.wait()


def _call(name: str, ws: Path, i: int, **args: Any) -> Any:
    ctx = ToolContext("ag_1", "t1", f"c{i}", f"ag_1/c{i}", ws)
    try:
        return as_tool(BUILTINS[name]).call(args, ctx)
    except (PathEscape, OSError):
        return None  # refused or not there at that instant: both fine


def test_reads_and_lists_never_reach_the_host_folder(racing: tuple[Path, Path]) -> None:
    ws, _host = racing
    reads = [_call("read_file", ws, i, path="d/f") for i in range(600)]
    assert not [r for r in reads if r is not None and HOST_TEXT in r]
    assert "inside" in reads  # the race really ran both ways
    for i in range(200):
        listed = _call("list_files", ws, i, path="d") or []
        assert all(p.startswith("d/") for p in listed)


def test_writes_never_land_in_the_host_folder(racing: tuple[Path, Path]) -> None:
    ws, host = racing
    for i in range(600):
        _call("write_file", ws, i, path=f"d/new{i}.txt", content="x")
    assert sorted(p.name for p in host.iterdir()) == ["f"]


def test_the_scan_survives_and_records_nothing_of_the_host(
    racing: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, _host = racing
    blobs = BlobStore(tmp_path / "blobs")
    workspace = Workspace(ws, blobs)
    for _ in range(300):
        manifest = workspace.scan()
        assert all(not p.startswith(("link", "host")) for p in manifest)
        for digest in manifest.values():
            assert HOST_TEXT.encode() not in blobs.get(digest)
