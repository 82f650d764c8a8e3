"""The operator's limits hold whatever the model asks: command time and workspace size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import Runtime, parse_spec
from stead.errors import SpecError
from stead.journal import Kind
from stead.sandbox.bwrap import BwrapSandbox
from stead.store.sqlite import SqliteStore


def _run(
    tmp_path: Path, script: list[Any], limits: dict[str, Any], **extra: Any
) -> tuple[Runtime, str]:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec(
        {
            "name": "limited",
            "model": "scripted:script.yaml",
            "tools": ["shell", "write_file", "list_files"],
            "limits": limits,
            **extra,
        },
        tmp_path,
    )
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data")
    agent_id = rt.create(spec).agent_id
    rt.run(agent_id)
    return rt, agent_id


def _results(rt: Runtime, agent_id: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent_id) if e.kind == Kind.TOOL_RESULT]


def test_a_command_that_fills_the_workspace_past_its_quota_is_undone(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    script = [
        # one file larger than the quota: stopped by the per-file limit as it writes
        {
            "tool": "shell",
            "args": {"command": "head -c 3000000 /dev/zero > big; echo $?; wc -c < big; rm big"},
        },
        # many files each under it, together over: undone when the command ends
        {
            "tool": "shell",
            "args": {"command": "for i in 1 2 3 4; do head -c 400000 /dev/zero > part$i; done"},
        },
        {"tool": "shell", "args": {"command": "echo fine > small"}},
        {"finish": "done"},
    ]
    rt, agent_id = _run(tmp_path, script, {"workspace_mb": 1})
    big, parts, small = _results(rt, agent_id)
    assert big["ok"] is True  # the command ran, and its write was cut at the quota
    status, size = big["output"]["stdout"].split()
    assert status != "0" and int(size) <= 2**20
    assert parts["ok"] is False
    assert "quota of 1 MiB" in parts["error"] and "undone" in parts["error"]
    assert small["ok"] is True
    state = rt.store.load_state(agent_id)
    assert sorted(state.manifest) == ["small"]
    workspace = tmp_path / "data" / "workspaces" / "default" / agent_id
    assert sorted(p.name for p in workspace.iterdir()) == ["small"]
    rt.close()


def test_write_file_refuses_a_write_past_the_quota_and_writes_nothing(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "data.bin").write_bytes(b"\0" * 900_000)
    script = [
        {"tool": "write_file", "args": {"path": "b.txt", "content": "y" * 200_000}},
        # rewriting a file counts its new size, not both
        {"tool": "write_file", "args": {"path": "data.bin", "content": "z" * 300_000}},
        {"finish": "done"},
    ]
    rt, agent_id = _run(tmp_path, script, {"workspace_mb": 1}, workspace="seed")
    refused, rewritten = _results(rt, agent_id)
    assert refused["ok"] is False and "quota of 1 MiB" in refused["error"]
    assert rewritten["ok"] is True
    assert sorted(rt.store.load_state(agent_id).manifest) == ["data.bin"]
    rt.close()


@pytest.mark.parametrize(
    "limits",
    [{"command_seconds": 0}, {"command_seconds": "a"}, {"workspace_mb": 0}, {"workspace_mb": 1.5}],
)
def test_bad_limits_are_refused_by_field(tmp_path: Path, limits: dict[str, Any]) -> None:
    (tmp_path / "script.yaml").write_text("- {finish: done}\n", encoding="utf-8")
    with pytest.raises(SpecError, match=f"limits.{next(iter(limits))}"):
        parse_spec({"name": "x", "model": "scripted:script.yaml", "limits": limits}, tmp_path)
