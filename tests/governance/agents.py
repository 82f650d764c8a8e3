"""Shared helpers for the governance tests: runtimes, agents, and a tool that counts runs."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from stead import FakeClock, Runtime, parse_spec
from stead.cli.main import main
from stead.store.sqlite import SqliteStore
from stead.tools.base import Tool, as_tool, tool

RUNS: list[dict[str, Any]] = []
"""Every real execution of :func:`deploy` and :func:`probe` in this process."""


@tool(effect="idempotent")
def deploy(target: str, size: int = 1) -> str:
    """Deploy to a target (records that it really ran)."""
    RUNS.append({"tool": "deploy", "target": target, "size": size})
    return f"deployed {target}"


@tool(effect="read_only")
def probe(target: str) -> str:
    """Look at a target."""
    RUNS.append({"tool": "probe", "target": target})
    return f"looked at {target}"


TOOLS: dict[str, Tool] = {"deploy": as_tool(deploy), "probe": as_tool(probe)}


VAULT_KEY = bytes(range(32))


def runtime_at(tmp_path: Path, clock: FakeClock, person: str = "alice@test") -> Runtime:
    """A runtime on the sqlite store in ``tmp_path``: a new one is a restarted worker."""
    rt = Runtime(
        SqliteStore(tmp_path / "s.db"),
        tmp_path / "data",
        clock=clock,
        lease_ttl=10.0,
        secret_key=VAULT_KEY,
    )
    rt.person = lambda: person  # type: ignore[method-assign]
    return rt


def make_agent(rt: Runtime, tmp_path: Path, script: list[Any], **spec: Any) -> str:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {"name": "gov", "model": "scripted:script.yaml", **spec}
    return rt.create(parse_spec(data, tmp_path)).agent_id


def run(rt: Runtime, agent_id: str, **kw: Any) -> Any:
    return rt.run(agent_id, tools=TOOLS, **kw)


def requested(rt: Runtime, agent_id: str) -> list[dict[str, Any]]:
    state = rt.store.load_state(agent_id)
    return [a for a in state.approvals.values() if a["status"] == "requested"]


def cli(args: list[str], tmp_path: Path) -> int:
    """``stead ARGS`` on the store in ``tmp_path``, run by a person holding the vault key
    (an agent made with a vault key signs every commit, so whoever writes to it needs it)."""
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]
    key = base64.b64encode(VAULT_KEY).decode()
    with mock.patch.dict(os.environ, {"STEAD_SECRET_KEY": key}):
        return main([*args, *store])
