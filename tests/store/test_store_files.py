"""The SQLite store's files are opened by its own connection and nothing else in the
process that holds it (issue 26, item 3; stead/storefiles.py).

SQLite's locks are POSIX locks: closing any other descriptor of ``stead.db`` in
the server's process drops the server's locks, so the next command in another
process takes itself for the last connection, checkpoints and deletes the WAL
the server still writes to, and what the server writes after is lost. The
first test is that sequence, end to end: a store held open as ``stead serve``
holds it, a workspace seeded from the store's folder (how it happened), a
``stead ls`` in another process, one more write by the server, and another
process must see it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import Runtime, parse_spec
from stead.errors import SteadError
from stead.store.sqlite import SqliteStore

ROOT = Path(__file__).parents[2]


def _agent(tmp_path: Path, **spec: Any) -> Any:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"finish": "ok"}]), encoding="utf-8")
    return parse_spec({"name": "a", "model": "scripted:script.yaml", **spec}, tmp_path)


def _cli_ls(url: str) -> set[str]:
    """``stead ls`` in a process of its own, as a person runs it beside the server."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "stead", "ls", "--json", "--store", url],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {a["agent_id"] for a in json.loads(done.stdout)}


def test_a_store_held_by_the_server_loses_no_write_to_a_copy_of_its_files(
    tmp_path: Path,
) -> None:
    db = tmp_path / "db" / "stead.db"
    url = f"sqlite:///{db}"
    rt = Runtime(SqliteStore(db), tmp_path / "data")  # the server's, held open throughout
    try:
        first = rt.create(_agent(tmp_path)).agent_id
        assert (tmp_path / "db" / "stead.db-wal").exists()
        # a spec whose workspace is the store's folder, as the server took it
        refused = ""
        try:
            rt.create(_agent(tmp_path, workspace=str(db.parent)))
        except SteadError as exc:
            refused = str(exc)
        seen = _cli_ls(url)  # another process opens and closes the store
        later = rt.create(_agent(tmp_path)).agent_id  # the server writes on
        held = {a.agent_id for a in rt.store.list_agents()}
        assert later in held and _cli_ls(url) == held  # nothing the server wrote is lost
        assert (tmp_path / "db" / "stead.db-wal").exists()
        # and the copy itself was refused, before anything was copied
        assert "file of the store this process has open" in refused
        assert seen == {first} == held - {later}
    finally:
        rt.close()
    assert {a.agent_id for a in SqliteStore(db).list_agents()} == {first, later}


def test_nothing_but_its_connection_opens_a_held_store_s_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stead import storefiles
    from stead.errors import SpecError
    from stead.models.options import parse_model
    from stead.models.recording import RecordingTransport, read_recording
    from stead.sandbox.workspace import Workspace
    from stead.snapshots.archive import read_archive, write_archive
    from stead.store.blobs import BlobStore
    from stead.yamlsafe import read_text

    db = tmp_path / "db" / "stead.db"
    store = SqliteStore(db)
    store.list_agents()
    opened: list[str] = []
    real_open = os.open

    def watched(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(os.fsdecode(path))
        return real_open(path, *args, **kwargs)

    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "ok.txt").write_text("ok", encoding="utf-8")
    os.symlink(db, seed / "linked.db")
    os.link(db, seed / "hard.db")
    monkeypatch.setattr(os, "open", watched)
    ws = Workspace(tmp_path / "ws", BlobStore(tmp_path / "blobs"))
    for where in (seed, db.parent):
        with pytest.raises(SteadError, match="file of the store this process has open"):
            ws.seed_from(where)
        assert not ws.root.exists()  # refused before anything was copied, and left empty
    for name in ("stead.db", "stead.db-wal", "stead.db-shm"):
        assert storefiles.is_held(db.parent / name), name
        with pytest.raises(SpecError, match="store this process has open"):
            read_text(db.parent / name, "spec", SpecError)
        with pytest.raises(SteadError, match="store this process has open"):
            read_archive(db.parent / name)
        with pytest.raises(SteadError, match="store this process has open"):
            read_recording(db.parent / name)
    opts = parse_model({"provider": "openai", "name": "m"})
    with pytest.raises(SteadError, match="store this process has open"):
        RecordingTransport(None, seed / "hard.db", opts)  # type: ignore[arg-type]
    with pytest.raises(SteadError, match="store this process has open"):
        write_archive(db, {}, [], None, bytes, "")  # type: ignore[arg-type]
    # a workspace holding a link to the store: scanned without opening it
    os.remove(seed / "linked.db")
    scanned = Workspace(seed, BlobStore(tmp_path / "blobs")).scan()
    assert sorted(scanned) == ["ok.txt"]
    names = {Path(p).name for p in opened}
    assert not names & {"hard.db", "linked.db", "stead.db", "stead.db-wal", "stead.db-shm"}, names
    store.close()
    assert not storefiles.is_held(db)  # its connection closed, it is a file like any other
