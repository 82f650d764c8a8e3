"""The API's endpoints: what each does, who may, and the JSON it takes and gives.

Each handler is the command line's own action through the tenant's runtime
(:class:`~stead.server.app.Call`), so the API and ``stead`` say the same
words. Agents made over HTTP come from a spec in the operator's spec folder
(``stead serve --specs DIR``, by file name), or from a spec in the request,
held to the one allowlist of :mod:`stead.server.netspec`: a spec from the
network must not make the server import a module, read a file or folder or
start a program of its choosing.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..destinations import provider_hosts
from ..errors import LeaseHeld, SpecError, UsageError
from ..governance.grants import NETWORK
from ..integrity.audit import audit
from ..integrity.inbox import explained
from ..snapshots import retention
from ..spec import AgentSpec, parse_spec
from ..state import State
from ..store.base import AgentSummary
from ..store.shown import shown_status
from ..yamlsafe import load_yaml, read_text
from . import auth
from .app import Call, Endpoint, Server
from .netspec import check_spec, endpoints
from .schemas import (
    AGENT,
    AGENT_STATE,
    APPROVAL,
    AUDIT,
    EVENT_PAGE,
    ID,
    NEW_AGENT,
    OBJECT,
    TEXT,
    listing,
    strict,
    whole,
)

_PAGE = 500
_log = logging.getLogger("stead.server")
PATIENCE_SECONDS = 5.0
"""How long a person's write waits for an agent's lease held by someone else."""
_T = TypeVar("_T")


def patiently(server: Server, key: str, write: Callable[[], _T]) -> _T:
    """``write``, a person's short write to one agent, made in its turn among this
    server's writes to ``key`` (see :func:`retrying`)."""
    with server.turn(key):
        return retrying(write)


def one_agent(handler: Callable[[Call], _T]) -> Callable[[Call], _T]:
    """``handler``, a person's write to the agent its path names, made
    :func:`patiently`: in turn with this server's other writes to that agent, and
    waiting out a lease held for a moment by someone else."""

    def patient(call: Call) -> _T:
        return patiently(call.server, call.params["agent_id"], lambda: handler(call))

    return patient


def retrying(work: Callable[[], _T]) -> _T:
    """``work`` on one agent, tried again while the agent's lease is held by someone
    else (another server, a command, a run's last step). ``LeaseHeld`` comes from
    taking the lease, before anything is written, so a write tried again is never
    made twice, and a run tried again resumes from its journal. A lease held longer
    than the patience (a worker's long step) is still refused."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    pause = 0.005
    while True:
        try:
            return work()
        except LeaseHeld:
            if time.monotonic() + pause > deadline:
                raise
        # jittered, so that those who met once do not meet again in step
        time.sleep(pause * random.uniform(0.5, 1.5))
        pause = min(pause * 2, 0.1)


def brief(state: State) -> dict[str, Any]:
    """What a write to an agent answers: the agent, its status, its version."""
    return {"agent_id": state.agent_id, "status": state.status, "version": state.version}


def _summary(a: AgentSummary, status: str) -> dict[str, Any]:
    return {"agent_id": a.agent_id, "tenant": a.tenant, "name": a.name, "status": status,
            "version": a.version, "updated_at": a.updated_at}  # fmt: skip


def list_agents(call: Call) -> Any:
    """The tenant's agents, each with the status a person should read (``queued``
    for one with work that no worker runs: :mod:`stead.store.shown`)."""
    wanted = call.query.get("status")
    store, now = call.rt.store, call.rt.clock.now()
    shown = [
        (a, shown_status(store, a.agent_id, a.status, now))
        for a in store.list_agents(call.token.tenant)
    ]
    return [_summary(a, status) for a, status in shown if wanted in (None, status)]


def spec_from(call: Call) -> AgentSpec:
    """The spec a request names: a file of the operator's spec folder (``spec_file``),
    or one in its body (``spec``) held to the network allowlist; made for the token's
    tenant. Creating an agent, a schedule of fresh agents and an upgrade take it alike."""
    body = call.body
    if "spec_file" in body:
        folder = call.server.specs
        if folder is None:
            raise UsageError("this server has no spec folder (stead serve --specs DIR)")
        name = Path(body["spec_file"])
        if name.name != body["spec_file"] or name.suffix not in (".yaml", ".yml", ".json"):
            raise UsageError(
                "spec_file is the name of a .yaml, .yml or .json file in the server's spec "
                "folder, without any folder of its own"
            )
        path = folder / name
        data = load_yaml(read_text(path, "spec", SpecError), f"spec {name}", SpecError)
        return _as_tenant(call, data, folder)
    data = body["spec"]
    # one allowlist for every spec from the network; it has no folder of its own
    check_spec(data, endpoints(call.rt.store, call.token.tenant))
    scope = data.get("scope") if isinstance(data, dict) else None
    granted = (
        [g.get("tool") for g in scope if isinstance(g, dict)] if isinstance(scope, list) else []
    )
    if NETWORK in granted and not auth.allows(call.token.role, "govern"):
        # a grant added over HTTP takes an admin; one carried by a spec must too
        raise SpecError(
            f"scope: a grant of {NETWORK!r} gives the agent's commands the network; a "
            f"{call.token.role} token cannot grant it: an admin token makes the agent, or "
            "the operator adds the grant on the server's host (stead grant)"
        )
    return _as_tenant(call, data, None)


def _as_tenant(call: Call, data: Any, base: Path | None) -> AgentSpec:
    """The spec, made for the token's tenant (a spec naming another is refused)."""
    if isinstance(data, dict):
        data = {"tenant": call.token.tenant, **data}
        if data["tenant"] != call.token.tenant:
            raise SpecError(
                f"tenant: the spec names tenant {data['tenant']!r}, but this token acts for "
                f"{call.token.tenant!r}; leave tenant out of the spec"
            )
    return parse_spec(data, base)


def create_agent(call: Call) -> Any:
    spec = spec_from(call)
    call.rt.check_loads(spec)
    state = call.rt.create(spec)
    return brief(state)


def show_agent(call: Call) -> Any:
    agent_id = call.params["agent_id"]
    record = call.rt.store.get_record(agent_id)
    state = call.rt.store.load_state(agent_id)
    status = shown_status(call.rt.store, agent_id, state.status, call.rt.clock.now())
    return {"agent_id": agent_id, "tenant": record.tenant, "name": record.name,
            "created_at": record.created_at, "status": status,
            "state": state.to_json()}  # fmt: skip


def _int(call: Call, name: str, default: int, low: int, high: int) -> int:
    text = call.query.get(name)
    if text is None:
        return default
    return whole(text, f"?{name}=", low, high)


def events(call: Call) -> Any:
    agent_id = call.params["agent_id"]
    after = _int(call, "after", 0, 0, 2**62)
    limit = _int(call, "limit", _PAGE, 1, _PAGE)
    page = [e.to_json() for e in call.rt.store.read_events(agent_id, after + 1, after + limit)]
    last = call.rt.store.load_state(agent_id).version
    upto = after + limit
    return {"events": page, "next": upto if upto < last else None}


def send(call: Call) -> Any:
    agent_id = call.params["agent_id"]
    state = patiently(call.server, agent_id, lambda: call.rt.send(agent_id, call.body["text"]))
    return brief(state)


def run(call: Call) -> Any:
    """Run the agent on the server, in the background, until it stops."""
    agent_id = call.params["agent_id"]
    call.rt.store.get_record(agent_id)  # NotFound for another tenant's
    rt = call.rt
    if call.server.workers is None or call.server.workers.count == 0:
        call.server.in_background(agent_id, lambda: _run_quietly(rt, agent_id))
    # else the server's own workers run it: the request's nudge wakes them
    return {"agent_id": agent_id, "running": True}


def _run_quietly(rt: Any, agent_id: str) -> None:
    try:
        # the request was answered "running": a person's write holding the lease for
        # a moment (the approval that let it go on) must not quietly stop it
        retrying(lambda: rt.run(agent_id))
    except Exception as exc:
        # what the journal cannot hold (a lease held past the patience, a store gone)
        # is told to the operator, on the server's log
        _log.warning("agent %s, run at a request, stopped: %s", agent_id, exc)


def cancel(call: Call) -> Any:
    """End the agent for good, whatever it is doing (:mod:`stead.runtime.ending`)."""
    return brief(call.rt.cancel(call.params["agent_id"], call.body["reason"]))


def delete(call: Call) -> Any:
    """Delete the agent; ``GET .../export`` first keeps its archive."""
    return retention.delete(call.rt, call.params["agent_id"])


def gc(call: Call) -> Any:
    """The tenant's retention: its finished agents older than the body says, then the
    blobs nothing of the tenant names (a day's grace)."""
    days = call.body.get("finished_older_than_days")
    return retention.gc(call.rt, None if days is None else float(days) * 86400,
                        dry_run=bool(call.body.get("dry_run", False)),
                        tenant=call.token.tenant)  # fmt: skip


def approvals(call: Call) -> Any:
    pending = explained(call.rt, call.rt.pending_approvals(call.token.tenant))
    return [{"agent_id": agent, **a} for agent, a in pending]


def approve(call: Call) -> Any:
    seconds = float(call.body.get("valid_for_seconds", 900))
    approval_id = call.params["approval_id"]
    agent, _ = patiently(call.server, approval_id, lambda: call.rt.approve(approval_id, seconds))
    return {"approval_id": call.params["approval_id"], "agent_id": agent,
            "valid_for_seconds": seconds, "by": call.rt.person()}  # fmt: skip


def deny(call: Call) -> Any:
    approval_id = call.params["approval_id"]
    reason = call.body["reason"]
    agent, _ = patiently(call.server, approval_id, lambda: call.rt.deny(approval_id, reason))
    return {"approval_id": call.params["approval_id"], "agent_id": agent,
            "by": call.rt.person()}  # fmt: skip


def grant(call: Call) -> Any:
    return call.rt.grant(call.params["agent_id"], call.body["grant"], call.body.get("reason", ""))


def put_secret(call: Call) -> None:
    """Seal a secret, bound to the hosts in ``to`` (or its ``provider``'s endpoint); one
    bound to neither goes to no URL but a provider's own (stead.destinations)."""
    agent_id = call.body.get("agent_id", "")
    if agent_id:
        call.rt.store.get_record(agent_id)  # NotFound for another tenant's
    provider = call.body.get("provider")
    if provider and "to" in call.body:
        raise UsageError('a secret is bound to "to" hosts or to a "provider", not both')
    to = provider_hosts(provider) if provider else call.body.get("to")
    call.rt.vault().set(
        call.token.tenant, call.params["name"], call.body["value"], agent_id=agent_id,
        at=call.rt.clock.now(), to=to,
    )  # fmt: skip


def audit_agent(call: Call) -> Any:
    agent_id = call.params["agent_id"]
    record = call.rt.store.get_record(agent_id)
    report = audit(call.rt.store, agent_id, vault=call.rt.vault(),
                   workspace=call.rt.workspace(agent_id, record.tenant),
                   now=call.rt.clock.now())  # fmt: skip
    return {"agent_id": agent_id, "ok": report.ok, "events": report.events,
            "head_hash": report.head_hash, "bad_event": report.bad_event,
            "reason": report.reason, "anchored": report.anchored, "anchor": report.anchor,
            "drift": list(report.drift), "spec": report.spec}  # fmt: skip


_AGENT = {"agent_id": ID}
ENDPOINTS = [
    Endpoint("GET", "/v1/agents", "read", "List the tenant's agents", list_agents,
             listing(AGENT), query={"status": {"type": "string"}}),
    Endpoint("POST", "/v1/agents", "operate", "Create an agent from a spec", create_agent,
             NEW_AGENT, body=strict(
                 {"spec": OBJECT, "spec_file": {"type": "string", "maxLength": 255}},
                 one_of=[["spec"], ["spec_file"]]), status=201),
    Endpoint("GET", "/v1/agents/{agent_id}", "read", "Show an agent's state", show_agent,
             AGENT_STATE),
    Endpoint("GET", "/v1/agents/{agent_id}/events", "read", "Read an agent's journal",
             events, EVENT_PAGE, query={"after": {"type": "integer", "minimum": 0},
                                        "limit": {"type": "integer", "minimum": 1,
                                                  "maximum": _PAGE}}),
    Endpoint("POST", "/v1/agents/{agent_id}/messages", "operate", "Send an agent a message",
             send, NEW_AGENT, body=strict({"text": {"type": "string", "minLength": 1,
                                                    "maxLength": 65536}}, required=["text"])),
    Endpoint("POST", "/v1/agents/{agent_id}/run", "operate", "Run an agent on the server",
             run, strict({"agent_id": ID, "running": {"type": "boolean"}}), status=202),
    Endpoint("POST", "/v1/agents/{agent_id}/cancel", "operate", "Cancel an agent for good",
             cancel, NEW_AGENT, body=strict({"reason": {"type": "string", "minLength": 1,
                                                      "maxLength": 4096}}, required=["reason"])),
    Endpoint("DELETE", "/v1/agents/{agent_id}", "govern", "Delete an agent and its workspace",
             delete, strict({"agent_id": ID, "tenant": ID, "name": TEXT,
                             "exported": {"type": "null"}})),
    Endpoint("POST", "/v1/gc", "govern", "Delete old finished agents, collect unused blobs",
             gc, strict({"agents": {"type": "array", "items": ID}, "blobs": {"type": "integer"},
                         "bytes": {"type": "integer"}, "kept": {"type": "integer"},
                         "dry_run": {"type": "boolean"}}),
             body=strict({"finished_older_than_days": {"type": "number", "minimum": 0,
                                                       "maximum": 36500},
                          "dry_run": {"type": "boolean"}})),
    Endpoint("GET", "/v1/agents/{agent_id}/audit", "read", "Verify an agent's journal",
             audit_agent, AUDIT),
    Endpoint("POST", "/v1/agents/{agent_id}/grants", "govern", "Add a grant to an agent's scope",
             one_agent(grant), OBJECT, body=strict({"grant": OBJECT, "reason": {"type": "string"}},
                                        required=["grant"]), status=201),
    Endpoint("GET", "/v1/approvals", "read", "List the approvals waiting for a person",
             approvals, listing(APPROVAL), tag="approvals"),
    Endpoint("POST", "/v1/approvals/{approval_id}/approve", "approve", "Approve a call once",
             approve, OBJECT, body=strict({"valid_for_seconds": {
                 "type": "number", "exclusiveMinimum": 0, "maximum": 30 * 86400}}),
             tag="approvals"),
    Endpoint("POST", "/v1/approvals/{approval_id}/deny", "approve", "Deny a call",
             deny, OBJECT, body=strict({"reason": {"type": "string", "minLength": 1,
                                                   "maxLength": 4096}}, required=["reason"]),
             tag="approvals"),
    Endpoint("PUT", "/v1/secrets/{name}", "govern", "Write a secret (never readable back)",
             put_secret, {}, body=strict({"value": {"type": "string", "minLength": 1,
                                                    "maxLength": 65536},
                                          "agent_id": {"type": "string"},
                                          "to": {"type": "array", "minItems": 1, "maxItems": 32,
                                                 "items": {"type": "string", "minLength": 1,
                                                           "maxLength": 255}},
                                          "provider": {"enum": ["openai", "anthropic"]}},
                                         required=["value"]),
             status=204, tag="secrets"),
]  # fmt: skip
"""Every endpoint of the API, in the order the OpenAPI document lists them."""
