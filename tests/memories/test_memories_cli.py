"""``stead memories``: a person lists, adds, corrects and forgets an agent's memories,
each change journaled with who made it; another tenant's agent is not found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.cli.main import main
from stead.store.sqlite import SqliteStore
from stead.summaries import summarize


def stead(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, Any]:
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]
    code = main([*args, *store, "--json"])
    text = capsys.readouterr().out
    return code, json.loads(text) if text.strip() else None


def make(tmp_path: Path) -> str:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"wait_for_input": "?"}]))
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock())
    spec = parse_spec({"name": "m", "model": "scripted:script.yaml"}, tmp_path)
    agent_id = rt.create(spec).agent_id
    rt.close()
    return agent_id


def test_a_person_edits_memories_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("stead.runtime.runtime.person", lambda: "ann@ops")
    agent_id = make(tmp_path)
    code, added = stead(capsys, tmp_path, "memories", "add", agent_id, "backups run at 02:00")
    assert code == 0 and added["source"] == "person"
    code, _ = stead(capsys, tmp_path, "memories", "add", agent_id, "the wiki is at w.example",
                    "--shared")  # fmt: skip
    code, listed = stead(capsys, tmp_path, "memories", "list", agent_id)
    assert sorted((m["text"], m["owner"]) for m in listed["memories"]) == [
        ("backups run at 02:00", agent_id), ("the wiki is at w.example", "shared")]  # fmt: skip
    code, found = stead(capsys, tmp_path, "memories", "recall", agent_id, "when do backups run",
                        "-k", "1")  # fmt: skip
    assert [m["text"] for m in found["memories"]] == ["backups run at 02:00"]
    mid = added["memory_id"]
    code, fixed = stead(
        capsys, tmp_path, "memories", "correct", agent_id, mid, "backups run at 03:00"
    )
    assert code == 0 and fixed["text"] == "backups run at 03:00"
    code, _ = stead(capsys, tmp_path, "memories", "forget", agent_id, mid)
    code, listed = stead(capsys, tmp_path, "memories", "list", agent_id)
    assert [m["text"] for m in listed["memories"]] == ["the wiki is at w.example"]
    assert stead(capsys, tmp_path, "memories", "forget", agent_id, mid)[0] != 0
    assert stead(capsys, tmp_path, "memories", "forget", agent_id, "../../x")[0] == 2
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock())
    kinds = [(e.kind, e.data.get("by")) for e in rt.store.read_events(agent_id)
             if e.kind.startswith("memory_")]  # fmt: skip
    saved, corrected, forgotten = Kind.MEMORY_SAVED, Kind.MEMORY_CORRECTED, Kind.MEMORY_FORGOTTEN
    assert [k for k, _ in kinds] == [saved, saved, corrected, forgotten]
    assert {by for _, by in kinds} == {"ann@ops"}
    trace = [summarize(e) for e in rt.store.read_events(agent_id) if e.kind.startswith("memory_")]
    assert trace[0] == f"{mid} [person] by ann@ops: backups run at 02:00"
    assert trace[1].endswith("(shared) [person] by ann@ops: the wiki is at w.example")
    assert trace[3] == f"{mid} [person] by ann@ops"  # forgotten: no text
    rt.close()
