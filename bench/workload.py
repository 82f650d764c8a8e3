"""The agent every benchmark runs: a small tool call and a memory write per step.

Each decision has two actions, as a real agent's often would: a call to
``lookup`` (a stand-in for a small API call; it returns 100 bytes of JSON) and
a ``remember`` of two fixed keys, so the agent's memory stays the same size
however long it runs. :func:`step_events` produces exactly the events an
activation journals for one such step, for building long histories without
running them.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import yaml

from stead import AgentSpec, Decision, Kind, ScriptedModel, parse_spec, tool
from stead.clock import Clock
from stead.ids import new_id
from stead.journal import NewEvent
from stead.models.base import parse_decision
from stead.tools.base import Tool, as_tool

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOL_REF = "bench.workload:lookup"
OUTPUT_BYTES = 100
_FIXED = 46
"""The bytes of lookup's JSON result other than its padding, for 11-character keys."""


def make_lookup(output_bytes: int = OUTPUT_BYTES) -> Any:
    """A ``lookup`` tool whose JSON result is ``output_bytes`` long."""
    value = "x" * max(0, output_bytes - _FIXED)

    @tool(effect="idempotent")
    def lookup(key: str) -> dict[str, Any]:
        """Return a record for ``key`` (a stand-in for a small API call)."""
        return {"key": key, "status": "ok", "value": value}

    return lookup


lookup = make_lookup()
TOOLS: dict[str, Tool] = {"lookup": as_tool(lookup)}


def tools(output_bytes: int = OUTPUT_BYTES) -> dict[str, Tool]:
    return TOOLS if output_bytes == OUTPUT_BYTES else {"lookup": as_tool(make_lookup(output_bytes))}


def decision_data(i: int) -> dict[str, Any]:
    """Decision ``i`` in its YAML short form: one tool call, one memory write."""
    key = f"item-{i:06d}"
    return {
        "actions": [
            {"tool": "lookup", "args": {"key": key}},
            {"remember": {"last_key": key, "looked_up": i + 1}},
        ]
    }


def decision(i: int) -> Decision:
    return parse_decision(decision_data(i), f"bench decision {i + 1}")


def model(n: int) -> ScriptedModel:
    """A scripted model with ``n`` decisions."""
    return ScriptedModel([decision(i) for i in range(n)], name="scripted")


def model_at(index: int) -> ScriptedModel:
    """A scripted model whose next decision (number ``index``) is a normal one.

    The earlier entries are the same object repeated, so this is cheap for any
    index; the model is only asked for decision ``index``.
    """
    d = decision(index)
    return ScriptedModel([d] * (index + 1), name="scripted")


def spec(workdir: Path, script_len: int = 1, model: Any = None) -> AgentSpec:
    """A validated spec for the bench agent (its script is written to ``workdir``);
    ``model``, if given, is the spec's model instead (a provider's, for example)."""
    script = workdir / "script.yaml"
    script.write_text(
        yaml.safe_dump([decision_data(i) for i in range(script_len)]), encoding="utf-8"
    )
    data = {
        "name": "bench",
        "instructions": "Look things up and remember the last one.",
        "model": f"scripted:{script}" if model is None else model,
        "tools": [TOOL_REF],
        "limits": {"max_steps": 1_000_000_000},
    }
    return parse_spec(data, REPO_ROOT)


def step_events(agent_id: str, step: int, clock: Clock, rng: random.Random) -> list[NewEvent]:
    """The events an activation journals for decision number ``step`` (1-based).

    Mirrors :mod:`stead.runtime.activation`: decision, tool intent (the tool is
    not read-only), tool result (no workspace change), memory write, step end.
    """
    actions: list[dict[str, Any]] = []
    for action in decision(step - 1).to_json():
        if action["type"] == "tool":
            action = {**action, "call_id": new_id("call", clock, rng)}
        actions.append(action)
    call, remember = actions
    call_id, args = call["call_id"], call["args"]
    context_hash = hashlib.sha256(f"{agent_id}/{step}".encode()).hexdigest()
    output = lookup(**args)
    return [
        NewEvent(
            Kind.DECISION,
            {"step": step, "context_hash": context_hash, "model": "scripted", "actions": actions},
        ),
        NewEvent(
            Kind.TOOL_INTENT,
            {
                "action": 0,
                "call_id": call_id,
                "tool": "lookup",
                "args": args,
                "effect": "idempotent",
                "idempotency_key": f"{agent_id}/{call_id}",
            },
        ),
        NewEvent(
            Kind.TOOL_RESULT,
            {
                "action": 0,
                "call_id": call_id,
                "tool": "lookup",
                "args": args,
                "rerun": False,
                "ok": True,
                "output": output,
            },
        ),
        NewEvent(Kind.MEMORY_WRITTEN, {"action": 1, "values": remember["values"]}),
        NewEvent(Kind.STEP_COMPLETED, {"step": step}),
    ]


STEP_KINDS = [
    Kind.DECISION,
    Kind.TOOL_INTENT,
    Kind.TOOL_RESULT,
    Kind.MEMORY_WRITTEN,
    Kind.STEP_COMPLETED,
]
"""The kinds of the events one step journals, in order."""
