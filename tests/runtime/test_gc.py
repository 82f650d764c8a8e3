"""Retention and collection (``stead gc``): finished agents past the retention go, and
with them the content only they named; what any other agent, journal version or
snapshot names stays."""

from __future__ import annotations

import json
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

from stead import Runtime
from stead.cli.main import main
from stead.snapshots import retention
from stead.snapshots.hibernation import hibernate
from stead.store.sqlite import SqliteStore

from .conftest import make_agent


def _write(path: str, content: str) -> dict[str, object]:
    return {"tool": "write_file", "args": {"path": path, "content": content}}


def _gc(tmp_path: Path, *args: str) -> dict[str, object]:
    printed = StringIO()
    with redirect_stdout(printed):
        code = main(["gc", "--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir",
                     str(tmp_path / "data"), "--json", *args])  # fmt: skip
    assert code == 0
    found: dict[str, object] = json.loads(printed.getvalue())
    return found


def _blobs(tmp_path: Path) -> set[str]:
    root = tmp_path / "data" / "blobs" / "default"
    return {p.parent.name + p.name for p in root.rglob("*") if p.is_file()}


def test_gc_deletes_finished_agents_past_retention_and_only_content_no_one_names(
    tmp_path: Path,
) -> None:
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data")
    gone = make_agent(rt, tmp_path, [_write("mine.txt", "only the first has this"),
                                     _write("both.txt", "shared"), {"finish": "ok"}])  # fmt: skip
    kept = make_agent(rt, tmp_path, [_write("both.txt", "shared"),
                                     _write("old.txt", "overwritten later"),
                                     _write("old.txt", "newer"), {"finish": "ok"}])  # fmt: skip
    sleeper = make_agent(rt, tmp_path, [_write("dream.txt", "in a snapshot"),
                                        {"wait_for_input": "more?"}, {"finish": "ok"}])  # fmt: skip
    for agent_id in (gone, kept, sleeper):
        rt.run(agent_id)
    hibernate(rt, sleeper)
    digest = {name: rt.workspace(gone, "default").blobs.put(name.encode())
              for name in ("only the first has this", "shared", "overwritten later",
                           "newer", "in a snapshot")}  # fmt: skip
    before = _blobs(tmp_path)
    assert set(digest.values()) <= before
    rt.close()

    # nothing is finished long enough ago, and everything is named: nothing goes
    assert _gc(tmp_path, "--finished-older-than", "1", "--grace", "0") == {
        "agents": [],
        "blobs": 0,
        "bytes": 0,
        "kept": len(before),
        "dry_run": False,
    }
    # a dry run says what would go, and deletes nothing
    dry = _gc(tmp_path, "--finished-older-than", "0", "--grace", "0", "--dry-run")
    assert sorted(dry["agents"]) == sorted([gone, kept])  # type: ignore[type-var]
    assert _blobs(tmp_path) == before

    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data")
    retention.delete(rt, gone)
    rt.close()
    done = _gc(tmp_path, "--grace", "0")
    assert done["agents"] == [] and done["blobs"] == 1
    left = _blobs(tmp_path)
    assert digest["only the first has this"] not in left
    # shared content, a journal's older version and a snapshot's files all stay
    for name in ("shared", "overwritten later", "newer", "in a snapshot"):
        assert digest[name] in left, name
    # and the sleeper wakes with its workspace whole
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data")
    rt.send(sleeper, "go on")
    assert rt.run(sleeper).state.status == "completed"
    assert (rt.workspace(sleeper, "default").root / "dream.txt").read_text() == "in a snapshot"
    rt.close()


def test_a_blob_stored_moments_ago_is_spared_by_the_grace(tmp_path: Path) -> None:
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data")
    fresh = rt.workspace("ag_x", "default").blobs.put(b"a step is about to name this")
    rt.close()
    assert _gc(tmp_path)["blobs"] == 0  # the default grace: a day
    assert fresh in _blobs(tmp_path)
    assert _gc(tmp_path, "--grace", "0")["blobs"] == 1
