"""Scripted agents for the telemetry tests, on a real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from stead import FakeClock, Runtime, parse_spec
from stead.store.sqlite import SqliteStore

VAULT_KEY = bytes(range(32))


def runtime(tmp_path: Path, clock: FakeClock | None = None) -> Runtime:
    """A runtime on ``tmp_path``'s store, with a vault: a new one is a restarted worker."""
    return Runtime(
        SqliteStore(tmp_path / "s.db"),
        tmp_path / "data",
        clock=clock or FakeClock(),
        secret_key=VAULT_KEY,
    )


def scripted(rt: Runtime, tmp_path: Path, script: list[Any], **spec: Any) -> str:
    """An agent named ``writer`` whose model answers ``script``, in order."""
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {
        "name": "writer",
        "instructions": "Write the notes.",
        "model": "scripted:script.yaml",
        "tools": ["write_file", "read_file", "list_files"],
        **spec,
    }
    return rt.create(parse_spec(data, tmp_path)).agent_id
