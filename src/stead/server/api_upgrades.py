"""Endpoints for upgrades of live agents: a new version of an agent's spec, its plan,
its rollback, and the versions it has had (:mod:`stead.upgrades`).

A new spec comes as a creation's does: the name of a file in the server's spec
folder, or a spec in the body, held to the one allowlist of specs from the network
(:mod:`stead.server.netspec`, through :func:`stead.server.api.spec_from`). An
operator token may upgrade; one whose upgrade widens what the agent may do (new
tools or MCP servers, higher limits or autonomy, a monitor removed) is refused
unless it is an admin's, which :func:`stead.upgrades.plan.check` decides from the
token's role.
"""

from __future__ import annotations

from typing import Any

from ..upgrades.apply import history, previous_spec
from .api import one_agent, spec_from
from .app import Call, Endpoint
from .schemas import ID, OBJECT, TEXT, answer, listing, strict

PLAN = answer({
    "agent_id": ID, "from": TEXT, "to": TEXT, "changes": {"type": "array"},
    "added_tools": listing(TEXT), "removed_tools": listing(TEXT), "blocking": listing(TEXT),
    "orphan_grants": listing(TEXT), "widening": listing(TEXT), "applied": {"type": "boolean"},
})  # fmt: skip
VERSION = answer(
    {"seq": {"type": "integer"}, "at": {"type": "number"}, "digest": TEXT, "kind": TEXT,
     "by": TEXT, "reason": TEXT, "changed": listing(TEXT)},
    required=["seq", "digest", "kind"],
)  # fmt: skip
_REASON = {"type": "string", "maxLength": 4096}


def upgrade(call: Call) -> Any:
    b = call.body
    found = call.rt.upgrade(call.params["agent_id"], spec_from(call), role=call.token.role,
                            reason=b.get("reason", ""), dry_run=bool(b.get("dry_run")))  # fmt: skip
    return {**found.to_json(), "applied": not b.get("dry_run") and not found.unchanged}


def rollback(call: Call) -> Any:
    agent_id = call.params["agent_id"]
    found = call.rt.upgrade(agent_id, previous_spec(call.rt.store, agent_id), rollback=True,
                            role=call.token.role,
                            reason=call.body.get("reason") or "rolled back")  # fmt: skip
    return {**found.to_json(), "applied": True}


def versions(call: Call) -> Any:
    return history(call.rt.store, call.params["agent_id"])


ENDPOINTS = [
    Endpoint("POST", "/v1/agents/{agent_id}/upgrade", "operate",
             "Apply a new version of an agent's spec (or show its plan: dry_run)",
             one_agent(upgrade), PLAN,
             body=strict({"spec": OBJECT, "spec_file": {"type": "string", "maxLength": 255},
                          "dry_run": {"type": "boolean"}, "reason": _REASON},
                         one_of=[["spec"], ["spec_file"]]), tag="lifecycle"),
    Endpoint("POST", "/v1/agents/{agent_id}/upgrade/rollback", "operate",
             "Put back the spec an agent had before its last upgrade", one_agent(rollback),
             PLAN, body=strict({"reason": _REASON}), tag="lifecycle"),
    Endpoint("GET", "/v1/agents/{agent_id}/spec-versions", "read",
             "The versions of an agent's spec, oldest first", versions, listing(VERSION),
             tag="lifecycle"),
]  # fmt: skip
