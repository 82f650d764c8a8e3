"""Endpoints for what an agent may do: scope, grants, autonomy, the tenant's policy,
outcomes a person decides, violations a person clears, proposals a person accepts.

Changing what an agent may do takes an ``admin`` token; deciding about what it
did (an unknown outcome, a violation, a proposal) an ``approver``'s.
"""

from __future__ import annotations

from typing import Any

from ..errors import NotFound, UsageError
from ..governance.gate import LEVELS
from ..integrity.clearing import cleared
from ..journal import Kind, NewEvent
from ..runtime.runtime import RESOLUTIONS
from ..sandbox.secrets import check_name
from ..state import State
from .api import brief, one_agent
from .app import Call, Endpoint
from .netspec import check_model, endpoints
from .schemas import ID, NEW_AGENT, OBJECT, TEXT, answer, listing, strict


def scope(call: Call) -> Any:
    return call.rt.scope(call.params["agent_id"])


def revoke(call: Call) -> Any:
    body = call.body or {}
    return brief(call.rt.revoke(call.params["agent_id"], call.params["grant_id"],
                                 body.get("reason", "")))  # fmt: skip


def autonomy(call: Call) -> Any:
    b = call.body
    state = call.rt.set_autonomy(call.params["agent_id"], b["level"], tool=b.get("tool"),
                                 reason=b.get("reason", ""))  # fmt: skip
    return brief(state)


def policy(call: Call) -> Any:
    record = call.rt.store.get_policy(call.token.tenant)
    if record is None:
        raise NotFound(
            f"tenant {call.token.tenant} has no policy; every call the scope ledger allows "
            "is allowed. Set one with PUT /v1/policy"
        )
    return {"version": record.version, "text": record.text, "set_by": record.set_by,
            "set_at": record.set_at}  # fmt: skip


def set_policy(call: Call) -> Any:
    version = call.rt.set_policy(call.token.tenant, call.body["text"])
    return {"tenant": call.token.tenant, "version": version}


def resolve(call: Call) -> Any:
    p = call.params
    return brief(call.rt.resolve(p["agent_id"], p["call_id"], call.body["resolution"]))


def clear(call: Call) -> Any:
    rt, p = call.rt, call.params
    state = rt.append_as_person(
        p["agent_id"],
        lambda s: cleared(s, p["violation_id"], rt.person(), call.body["reason"]),
    )
    return brief(state)


def accept(call: Call) -> Any:
    return brief(call.rt.accept(call.params["agent_id"], call.params["proposal_id"]))


def set_model(call: Call) -> Any:
    """Give the agent another provider's model, as a spec from the network may name
    one (:func:`stead.server.netspec.check_model`): scripted and recorded models are
    read from files of the server's host, so only a worker's operator sets those."""
    model = call.body["model"]
    check_model(model, endpoints(call.rt.store, call.token.tenant))
    return brief(call.rt.set_model(call.params["agent_id"], model))


def sign_off(call: Call) -> Any:
    rt, p = call.rt, call.params

    def build(state: State) -> list[NewEvent]:
        if not any(g["id"] == p["goal_id"] for g in state.goals):
            goals = ", ".join(g["id"] for g in state.goals) or "none"
            raise UsageError(f"agent {p['agent_id']} has no goal {p['goal_id']}; goals: {goals}")
        return [NewEvent(Kind.GOAL_SIGNED_OFF, {"id": p["goal_id"], "by": rt.person()})]

    return brief(rt.append_as_person(p["agent_id"], build))


def secrets(call: Call) -> Any:
    """The tenant's secrets by name; not stead's own (an agent's signing key is kept
    sealed in the vault as ``stead.identity``, which no person writes or removes)."""
    rows = call.rt.store.list_secrets(call.token.tenant)
    return [{"name": n, "agent_id": a or None, "updated_at": t} for a, n, t in rows
            if not n.startswith("stead.")]  # fmt: skip


def delete_secret(call: Call) -> None:
    agent_id = call.query.get("agent_id", "")
    if agent_id:
        call.rt.store.get_record(agent_id)  # NotFound for another tenant's
    name = check_name(call.params["name"])
    if not call.rt.store.delete_secret(call.token.tenant, agent_id, name):
        raise NotFound(f"no secret {name} for {'agent ' + agent_id if agent_id else 'the tenant'}")


_REASON = {"type": "string", "maxLength": 4096}
BRIEF = NEW_AGENT
ENDPOINTS = [
    Endpoint("GET", "/v1/agents/{agent_id}/scope", "read",
             "Show what an agent may do now, and until when", scope,
             answer({"agent_id": ID, "autonomy": TEXT, "grants": {"type": "array"},
                     "policy_version": {"type": "integer"}}), tag="governance"),
    Endpoint("DELETE", "/v1/agents/{agent_id}/grants/{grant_id}", "govern",
             "Revoke a grant (and its delegations)", one_agent(revoke), BRIEF,
             body=strict({"reason": _REASON}), tag="governance"),
    Endpoint("PUT", "/v1/agents/{agent_id}/autonomy", "govern",
             "Set an agent's autonomy, or one tool's", one_agent(autonomy), BRIEF,
             body=strict({"level": {"enum": list(LEVELS)}, "tool": {"type": "string"},
                          "reason": _REASON}, required=["level"]), tag="governance"),
    Endpoint("GET", "/v1/policy", "read", "Show the tenant's Cedar policy", policy,
             answer({"version": {"type": "integer"}, "text": TEXT}), tag="governance"),
    Endpoint("PUT", "/v1/policy", "govern", "Set the tenant's Cedar policy", set_policy,
             answer({"tenant": ID, "version": {"type": "integer"}}),
             body=strict({"text": {"type": "string", "minLength": 1, "maxLength": 1 << 20}},
                         required=["text"]), tag="governance"),
    Endpoint("POST", "/v1/agents/{agent_id}/calls/{call_id}/resolve", "approve",
             "Decide a call whose outcome is unknown", one_agent(resolve), BRIEF,
             body=strict({"resolution": {"enum": list(RESOLUTIONS)}}, required=["resolution"]),
             tag="governance"),
    Endpoint("POST", "/v1/agents/{agent_id}/violations/{violation_id}/clear", "approve",
             "Clear a violation that suspended an agent", one_agent(clear), BRIEF,
             body=strict({"reason": {"type": "string", "minLength": 1, "maxLength": 4096}},
                         required=["reason"]), tag="governance"),
    Endpoint("PUT", "/v1/agents/{agent_id}/model", "operate",
             "Give an agent another provider's model from its next decision",
             one_agent(set_model), BRIEF,
             body=strict({"model": {"type": ["string", "object"]}}, required=["model"]),
             tag="governance"),
    Endpoint("POST", "/v1/agents/{agent_id}/goals/{goal_id}/signoff", "approve",
             "Sign off a goal that needs a person", one_agent(sign_off), BRIEF, body=OBJECT,
             tag="governance"),
    Endpoint("GET", "/v1/secrets", "govern", "List the tenant's secrets (names only)",
             secrets, listing(answer({"name": TEXT, "agent_id": {"type": ["string", "null"]},
                                      "updated_at": {"type": "number"}})), tag="secrets"),
    Endpoint("DELETE", "/v1/secrets/{name}", "govern", "Remove a secret", delete_secret, {},
             status=204, query={"agent_id": {"type": "string"}}, tag="secrets"),
    Endpoint("POST", "/v1/agents/{agent_id}/proposals/{proposal_id}/accept", "approve",
             "Run a proposed call now, under your authority", one_agent(accept), BRIEF, body=OBJECT,
             tag="governance"),
]  # fmt: skip
