"""Rendering the model's context from durable state, deterministically.

The same state and tools always render the same text, byte for byte: no
clock, no randomness, no dictionary-order accidents (everything is sorted or
kept in journal order). The SHA-256 of the rendered text and tool schemas is
journaled with every decision, so a later reader can tell exactly what the
model was shown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..canonical import digest, dumps
from ..models.base import RenderedContext
from ..state import State
from ..tools.base import Tool


def _short(value: Any) -> str:
    # the state already clips calls to CLIP_CHARS; this only turns them into text
    return value if isinstance(value, str) else dumps(value)


def render(state: State, spec: Mapping[str, Any], tools: Mapping[str, Tool]) -> RenderedContext:
    """Render the context for the agent's next decision."""
    lines = [f"# Agent {spec['name']}", "", "## Instructions", spec.get("instructions") or "(none)"]
    lines += ["", "## Goals"]
    lines += [f"- [{g['status']}] {g['id']}: {g['description']}" for g in state.goals] or ["(none)"]
    lines += ["", "## Memory"]
    lines.append(
        json.dumps(state.memory, sort_keys=True, indent=2, ensure_ascii=False)
        if state.memory
        else "(empty)"
    )
    lines += ["", f"## Recent tool calls ({len(state.recent_calls)} of {state.calls_total})"]
    for c in state.recent_calls:
        outcome = f"ok: {_short(c.get('output'))}" if c["ok"] else f"error: {c.get('error')}"
        lines.append(f"- {c['call_id']} {c['tool']}({_short(c.get('args') or {})}) -> {outcome}")
    if not state.recent_calls:
        lines.append("(none)")
    lines += ["", "## Messages"]
    lines += [f"- {m}" for m in state.inbox] or ["(none)"]
    lines += ["", "## Workspace", f"{len(state.manifest)} files"]
    lines += [
        "",
        "## Step",
        f"{state.decisions + 1} of at most {spec.get('limits', {}).get('max_steps', '?')}",
    ]
    text = "\n".join(lines) + "\n"
    schemas = [
        {
            "name": t.name,
            "effect": t.effect.value,
            "description": t.description,
            "parameters": dict(t.schema),
        }
        for t in sorted(tools.values(), key=lambda t: t.name)
    ]
    return RenderedContext(
        text=text,
        hash=digest({"text": text, "tools": schemas}),
        step=state.decisions,
        tools=schemas,
    )
