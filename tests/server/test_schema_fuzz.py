"""Schemathesis against the served OpenAPI document: every operation, with requests
made from its schemas (valid ones and broken ones), answered without a server error
and as the document says (a documented status, its content type, its body schema).

The requests go to the ASGI application in-process, with tokens of three roles, and
name real agents and approvals as well as made-up ones, so the paths past "not
found" are reached too. Hypothesis runs derandomized with a bounded number of
examples, so a run is the same every time and takes well under a minute.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from stead.server.api import ENDPOINTS
from stead.server.errors import OWN, STATUS

from .conftest import Served
from .test_api import made, run_until

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES = {GenerationMode.POSITIVE: 50, GenerationMode.NEGATIVE: 25}
STREAM = "/v1/agents/{agent_id}/stream"
"""Never ends while its client stays, so it is left to the stream's own tests."""
ROLES = ("admin", "admin", "approver", "viewer")


def _without_lifespan(app: Any) -> Callable[..., Any]:
    """``app`` for schemathesis's client, whose lifespan lasts as long as the process:
    the served fixture's client starts and stops the server's own."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)

    return asgi


def _waiting_approval(served: Served) -> str:
    agent_id = made(served, "approver.yaml")
    assert run_until(served, agent_id, {"waiting"}) == "waiting"
    pending = served.call("GET", "/v1/approvals", "acme", "viewer").json()
    return str(next(p["approval_id"] for p in pending if p["agent_id"] == agent_id))


def _seeded(served: Served) -> dict[str, dict[str, list[str]]]:
    """Real names for the path parameters of each operation (by label; "" for any):
    agents waiting on a person, waiting for input, never run, and one of another
    tenant's (never found); approvals waiting, some to approve and some to deny."""
    approve = [_waiting_approval(served) for _ in range(3)]
    deny = [_waiting_approval(served) for _ in range(3)]
    asking = made(served, "waiter.yaml")
    assert run_until(served, asking, {"waiting"}) == "waiting"
    agents = [*served.call("GET", "/v1/agents", "acme", "viewer").json()]
    return {
        "": {
            "agent_id": [a["agent_id"] for a in agents] + [made(served, "waiter.yaml"),
                         made(served, "waiter.yaml", "globex")],
            "approval_id": approve,
            "name": ["API_KEY"],
        },
        "POST /v1/approvals/{approval_id}/deny": {"approval_id": deny},
    }  # fmt: skip


GOOD = {
    "POST /v1/agents": {"spec_file": "waiter.yaml"},
    "POST /v1/agents/{agent_id}/grants": {"grant": {"tool": "read_file"}, "reason": "fuzzed"},
    "PUT /v1/policy": {"text": "permit(principal, action, resource);"},
}
"""A body the schema alone would hardly make, that names something real (positive runs
send it now and then)."""


def fuzz(
    served: Served,
    real: dict[str, dict[str, list[str]]],
    operation: Any,
    mode: GenerationMode,
    examples: int,
    tried: dict[str, set[int]],
) -> None:
    """Send ``examples`` requests made for ``operation``; record the statuses answered."""
    names = re.findall(r"{(\w+)}", operation.path)
    known = {**real[""], **real.get(operation.label, {})}
    good = GOOD.get(operation.label) if mode == GenerationMode.POSITIVE else None

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=False)  # fmt: skip
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        # a real name or one the schema makes up, for each path parameter
        fixed = {}
        for name in names:
            pick = data.draw(st.sampled_from([None, *known.get(name, [])]), label=name)
            if pick is not None:
                fixed[name] = pick
        extra = {}
        if good is not None and data.draw(st.booleans(), label="good body"):
            extra["body"] = good
        strategy = operation.as_strategy(mode, path_parameters=fixed, **extra)
        case = data.draw(strategy, label="case")
        role = data.draw(st.sampled_from(ROLES), label="role")
        response = case.call_and_validate(headers=served.as_("acme", role), checks=CHECKS)
        tried.setdefault(operation.label, set()).add(response.status_code)

    check()


def test_every_operation_answers_as_its_document_says(served: Served) -> None:
    real = _seeded(served)
    # every request below comes from one address; none should be held off for others
    served.server.attempts.limit = 1 << 30
    app = _without_lifespan(served.client.app)
    schema = schemathesis.openapi.from_asgi("/v1/openapi.json", app)
    operations = [
        result.ok()  # an operation the document declares badly fails here
        for result in schema.get_all_operations()
        if result.ok().path != STREAM
    ]
    # schemathesis leaves out the document's own operation
    documented = {f"{m.upper()} {p}" for p, ops in schema.raw_schema["paths"].items() for m in ops}
    assert {op.label for op in operations} == documented - {f"GET {STREAM}", "GET /v1/openapi.json"}
    tried: dict[str, set[int]] = {}
    for operation in operations:
        for mode, examples in EXAMPLES.items():
            try:
                fuzz(served, real, operation, mode, examples, tried)
            except Unsatisfiable:
                # no request to it can be malformed: it takes nothing, not even a token
                raw = operation.definition.raw
                assert mode == GenerationMode.NEGATIVE and raw["security"] == [], operation
                assert not raw.get("parameters") and "requestBody" not in raw, operation

    # the requests reached past refusals: each of the core operations (and the open
    # ones) answered a success at least once
    core = {f"{e.method} {e.path}" for e in ENDPOINTS} | {"GET /v1/health"}
    succeeded = {label for label, codes in tried.items() if any(c < 300 for c in codes)}
    assert core <= succeeded, {label: tried.get(label) for label in core - succeeded}


def test_every_error_status_the_server_answers_is_documented(served: Served) -> None:
    answered = {status for _, status in STATUS} | set(OWN.values())
    doc = served.client.get("/v1/openapi.json").json()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if op.get("security") == []:
                continue  # the open two answer only themselves
            documented = {int(code) for code in op["responses"]}
            # 405 answers a method the document does not list, so none of its operations
            assert answered - {405} <= documented, (method, path)
