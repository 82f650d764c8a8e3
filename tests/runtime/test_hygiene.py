"""Worker hygiene: nothing of an agent outlives its activation in module state."""

from __future__ import annotations

import gc
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from stead import Runtime, parse_spec
from stead.runtime.activation import Activation
from stead.runtime.context import Renderer
from stead.store.memory import MemoryStore


def _contains(value: Any, needle: str, depth: int = 0, seen: set[int] | None = None) -> bool:
    seen = set() if seen is None else seen
    if depth > 6 or id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, str):
        return needle in value
    if isinstance(value, dict):
        return any(
            _contains(k, needle, depth + 1, seen) or _contains(v, needle, depth + 1, seen)
            for k, v in value.items()
        )
    if isinstance(value, list | tuple | set | frozenset):
        return any(_contains(v, needle, depth + 1, seen) for v in value)
    return False


def test_no_module_keeps_anything_of_an_agent_after_its_run(tmp_path: Path) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    script = [
        {"tool": "write_file", "args": {"path": "c.txt", "content": canary}},
        {"tool": "read_file", "args": {"path": "c.txt"}},
        {"remember": {"k": canary}},
        {"finish": canary},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    spec = parse_spec(
        {"name": canary, "model": "scripted:script.yaml", "tools": ["write_file", "read_file"]},
        tmp_path,
    )
    rt = Runtime(MemoryStore(), tmp_path / "data")
    agent = rt.create(spec).agent_id
    assert rt.run(agent).state.status == "completed"
    rt.close()
    del rt
    gc.collect()
    for name, module in list(sys.modules.items()):
        if not name.startswith("stead"):
            continue
        for attr, value in vars(module).items():
            assert not _contains(value, canary), f"{name}.{attr} holds the agent's data"
            assert not _contains(value, agent), f"{name}.{attr} holds the agent's id"
    live = [
        o
        for o in gc.get_objects()
        if (isinstance(o, Activation) and o.record.agent_id == agent)
        or (isinstance(o, Renderer) and o.spec.get("name") == canary)
    ]
    assert live == [], "an activation or renderer outlived its run"
