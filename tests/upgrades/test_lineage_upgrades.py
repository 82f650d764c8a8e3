"""Upgrades across a fork, an export and an import: the new agent is born with the spec
in force, sealed in its own first event; an archive keeps the upgrade events."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.snapshots.archive import read_archive
from stead.store.anchors import spec_digest
from stead.store.sqlite import SqliteStore
from stead.testing import scripted
from stead.upgrades.apply import history

WAIT = [{"wait_for_input": "more?"}] * 6
KEY = os.urandom(32)


def spec(**extra: Any) -> dict[str, Any]:
    return {"name": "helper", "model": "scripted:script.yaml", "instructions": "v1",
            "tools": ["read_file"], **extra}  # fmt: skip


def upgraded(tmp_path: Path, store: str = "s.db") -> tuple[Runtime, str]:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(WAIT), encoding="utf-8")
    rt = Runtime(SqliteStore(tmp_path / store), tmp_path / f"{store}.data", clock=FakeClock(),
                 secret_key=KEY)  # fmt: skip
    agent_id = rt.create(parse_spec(spec(), tmp_path)).agent_id
    rt.run(agent_id, model=scripted(WAIT))
    rt.upgrade(agent_id, parse_spec(spec(instructions="v2"), tmp_path), reason="v2")
    return rt, agent_id


def test_a_fork_is_born_with_the_spec_in_force_even_from_before_the_upgrade(
    tmp_path: Path,
) -> None:
    rt, agent_id = upgraded(tmp_path)
    v2 = spec_digest(rt.store.get_record(agent_id).spec)
    for at in (None, 2):  # now, and a version from before the upgrade
        fork = rt.fork(agent_id, at_version=at).agent_id
        assert rt.store.get_record(fork).spec["instructions"] == "v2"
        assert [(r["kind"], r["digest"]) for r in history(rt.store, fork)] == [
            ("agent_forked", v2)]  # fmt: skip
        assert rt.store.load_state(fork).spec_digest == ""  # its birth seals it
        rt.send(fork, "go")
        assert rt.run(fork, model=scripted(WAIT)).state.status == "waiting"


def test_an_archive_keeps_the_upgrades_and_imports_with_the_latest_spec_sealed(
    tmp_path: Path,
) -> None:
    rt, agent_id = upgraded(tmp_path)
    done = rt.export(agent_id, tmp_path / "a.stead")
    archive = read_archive(Path(done["path"]))
    ups = [e for e in archive.events if e.kind == Kind.SPEC_UPGRADED]
    assert [e.data["reason"] for e in ups] == ["v2"]
    assert archive.header["agent"]["spec"]["instructions"] == "v2"
    assert archive.state.spec_digest == ups[0].data["to"]
    other, _ = upgraded(tmp_path, "other.db")
    imported = other.import_archive(done["path"]).agent_id
    assert other.store.get_record(imported).spec["instructions"] == "v2"
    rows = history(other.store, imported)
    assert [(r["kind"], r["digest"]) for r in rows] == [("agent_imported", ups[0].data["to"])]
    other.send(imported, "go on")
    assert other.run(imported, model=scripted(WAIT)).state.status == "waiting"


def test_an_mcp_server_added_by_an_upgrade_is_listed_in_its_commit(tmp_path: Path) -> None:
    rt, agent_id = upgraded(tmp_path)
    rt.hibernate(agent_id)  # listed over an empty folder: the workspace is a snapshot
    time_server = {"name": "time", "command": ["mcp-server-time"]}
    found = rt.upgrade(agent_id, parse_spec(spec(instructions="v2", mcp=[time_server]),
                                            tmp_path))  # fmt: skip
    assert found.added_tools == ("time__*",) and found.widening == (
        "adds the tool time__*",
        "adds the MCP server time",
    )
    events = list(rt.store.read_events(agent_id))
    last = events[-1].seq
    upgrade = next(e for e in events if e.kind == Kind.SPEC_UPGRADED and e.data["reason"] == "")
    listed = [e for e in events if e.kind == Kind.MCP_TOOLS_LISTED]
    assert [e.data["server"] for e in listed] == ["time"] and listed[0].seq == last
    assert upgrade.seq < listed[0].seq  # one commit: the upgrade, its grant, the listing
    shown = set(rt.tools_for(rt.store.get_record(agent_id)))
    assert "time__get_current_time" in shown
    grants = {g["tool"] for g in rt.store.load_state(agent_id).grants.values()}
    assert "time__*" in grants
