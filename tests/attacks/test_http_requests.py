"""Boundary: specs and requests over HTTP (docs/security.md).

Anyone who can reach ``stead serve`` may send anything, and a token holder
may reach past its role. What must never happen: a request without a valid
token, or above its token's role, changes or reads anything; repeated guesses
go on unchecked; a spec sent over the network names Python, a file or a
program of the host; a secret is read back; the server answers with a
traceback or off its own document; the page runs what an agent wrote, or a
cookie alone acts for a person, or a login sends a person to another site.

The first two tests run Schemathesis against the served OpenAPI document:
every operation, with requests made from its schemas (valid ones and broken
ones), answered without a server error and as the document says (a documented
status, its content type, its body schema). The requests go to the ASGI
application in-process, with tokens of three roles, and name real agents and
approvals as well as made-up ones, so the paths past "not found" are reached
too. Hypothesis runs derandomized with a bounded number of examples, so a run
is the same every time and takes well under a minute.

A request for another tenant's agents is in tests/attacks/test_tenants.py.
"""

from __future__ import annotations

import json
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
from stead.store.tokens import ROLES as RANKED_ROLES

from ..models.fake_servers import FakeServer, Reply, openai_answer, openai_call
from ..server import conftest as server_fixtures
from ..server.conftest import Served, write_spec
from ..server.test_api import ORDER, made, requests_for, run_until, waiting_approval
from ..server.test_web import logged_in

served = server_fixtures.served
"""A served store, two tenants, a token of every role (tests/server/conftest.py)."""

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


ENDING = {"POST /v1/agents/{agent_id}/cancel", "DELETE /v1/agents/{agent_id}", "POST /v1/gc"}


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
    # what ends agents goes last: the others need the seeded agents alive to succeed
    operations.sort(key=lambda op: op.label in ENDING)
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


# -- every route behind a token and a role ------------------------------------------------


def test_every_route_needs_a_valid_token(served: Served) -> None:
    agent_id, approval_id = waiting_approval(served)
    for e, path, body in requests_for(served, agent_id, approval_id):
        for headers in (
            {},
            {"authorization": "Bearer stead.tok_x.y"},
            {"authorization": "Basic x"},
        ):
            got = served.client.request(e.method, path, headers=headers, json=body)
            assert got.status_code == 401, (e.path, got.text)
            assert got.json()["error"]["code"] == "unauthenticated"
        served.server.attempts.clear()  # these tests come from one address


def test_each_role_may_do_only_what_its_rank_allows(served: Served) -> None:
    agent_id, approval_id = waiting_approval(served)
    for e, path, body in requests_for(served, agent_id, approval_id):
        needed = RANKED_ROLES.index(ORDER[e.action])
        for role in RANKED_ROLES[:needed]:
            got = served.call(e.method, path, "acme", role, json=body)
            assert got.status_code == 403, (e.path, role, got.text)
            error = got.json()["error"]
            assert error["code"] == "forbidden" and ORDER[e.action] in error["message"]
    # nothing a refused request asked for happened
    assert served.call("GET", "/v1/approvals", "acme", "viewer").json()[0]["approval_id"] == (
        approval_id
    )


def test_repeated_failed_logins_are_held_off_and_logged_for_the_operator(
    served: Served,
) -> None:
    wrong = "stead.tok_01M8YPHBWGKWYK92E81BHMSGNQ." + "A" * 43
    for _ in range(served.server.attempts.limit):
        got = served.client.get("/v1/agents", headers={"authorization": f"Bearer {wrong}"})
        assert got.status_code == 401
    # now a bad token from that address waits, told how long (and logged once more)
    for _ in range(5):
        held = served.client.get("/v1/agents", headers={"authorization": f"Bearer {wrong}"})
        assert held.status_code == 429 and int(held.headers["retry-after"]) >= 1
    # while a good one is never held off for others' failures
    good = served.client.get("/v1/agents", headers=served.as_("acme", "viewer"))
    assert good.status_code == 200
    log = served.server.tokens.operator_log()
    assert len(log) == served.server.attempts.limit + 1
    assert [e.kind for e in log] == ["auth_failed"] * served.server.attempts.limit + [
        "auth_held_off"
    ]
    assert log[0].data["reason"] == "no such token"
    assert all("A" * 43 not in json.dumps(e.data) for e in log)  # never what was presented


def test_a_spec_from_the_network_may_not_reach_into_the_host(served: Served) -> None:
    refused = [
        ({"spec_file": "../db/stead.db"}, "spec_file is the name"),
        ({"spec_file": "missing.yaml"}, "spec"),
        ({"spec": {"name": "x", "model": "scripted:/etc/passwd", "tools": ["read_file"]}},
         "scripted and recorded models"),
        ({"spec": {"name": "x", "model": {"provider": "openai", "name": "m"},
                   "tools": ["os:system"]}}, "only stead's own tools"),
        ({"spec": {"name": "x", "model": {"provider": "openai", "name": "m"},
                   "mcp": {"s": {"command": ["sh"]}}}}, "starts no MCP servers"),
        ({"spec_file": "waiter.yaml", "spec": {}}, "bad_request"),
        ({"spec_file": "waiter.yaml", "extra": 1}, "bad_request"),
    ]  # fmt: skip
    for body, needle in refused:
        got = served.call("POST", "/v1/agents", "acme", "operator", json=body)
        assert got.status_code in (400, 404), (body, got.text)
        assert needle in got.text, (body, got.text)
    not_json = served.call("POST", "/v1/agents", "acme", "operator", content=b"{nope")
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "bad_request"
    assert served.call("GET", "/v1/agents", "acme", "viewer").json() == []


def test_secrets_are_written_and_never_read_back(served: Served) -> None:
    got = served.call("PUT", "/v1/secrets/API_KEY", "acme", "admin", json={"value": "s3cr3t-v"})
    assert got.status_code == 204 and got.content == b""
    assert served.runtime("acme").vault().get("acme", "", "API_KEY") == "s3cr3t-v"
    read = served.call("GET", "/v1/secrets/API_KEY", "acme", "admin")
    assert read.status_code == 405 and "s3cr3t" not in read.text
    approver = served.call("PUT", "/v1/secrets/API_KEY", "acme", "approver", json={"value": "x"})
    assert approver.status_code == 403


# -- the page ------------------------------------------------------------------------------


def test_the_pages_need_a_login_and_a_bad_token_is_logged(served: Served) -> None:
    for path in ("/", "/approvals", "/agents/ag_x"):
        got = served.client.get(path, follow_redirects=False)
        assert got.status_code == 303 and got.headers["location"] == f"/login?next={path}"
    bad = served.client.post("/login", data={"token": "stead.tok_nope.x"})
    assert bad.status_code == 401 and "not valid" in bad.text
    assert served.server.tokens.operator_log()[-1].data["path"] == "/login"


def test_a_viewer_sees_the_inbox_but_cannot_answer(served: Served) -> None:
    _, approval_id = waiting_approval(served)
    csrf = logged_in(served, role="viewer")
    inbox = served.client.get("/approvals")
    assert approval_id in inbox.text and "Approve</button>" not in inbox.text
    got = served.client.post(f"/approvals/{approval_id}/approve",
                             data={"valid_for": "1 hour", "csrf": csrf})  # fmt: skip
    assert got.status_code == 403
    assert len(served.call("GET", "/v1/approvals", "acme", "viewer").json()) == 1


def test_what_an_agent_wrote_is_shown_as_text_never_run(served: Served) -> None:
    hostile = "<script>alert('x')</script><img src=x onerror=alert(1)>"
    write_spec(served.specs, "hostile",
               [{"tool": "write_file", "args": {"path": "a.txt", "content": hostile}},
                {"finish": hostile}], autonomy="act_with_approval")  # fmt: skip
    agent_id = made(served, "hostile.yaml")
    run_until(served, agent_id, {"waiting"})
    logged_in(served)
    for path in ("/approvals", f"/agents/{agent_id}"):
        page = served.client.get(path).text
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "&lt;script&gt;" in page or "\\u003cscript" in page


def test_the_page_s_session_may_read_the_stream_but_never_write_through_the_api(
    served: Served,
) -> None:
    agent_id = made(served, "waiter.yaml")
    logged_in(served, role="admin")
    with served.client.stream("GET", f"/v1/agents/{agent_id}/stream") as answer:
        assert answer.status_code == 200
        first = next(line for line in answer.iter_lines() if line.startswith("id: "))
        assert first == "id: 1"
    write = served.client.post(f"/v1/agents/{agent_id}/messages", json={"text": "hi"})
    assert write.status_code == 401  # a cookie is no credential for a change


def test_a_login_goes_on_to_the_page_asked_for_and_never_to_another_site(
    served: Served,
) -> None:
    agent_id = made(served, "waiter.yaml")
    asked = served.client.get(f"/agents/{agent_id}", follow_redirects=False)
    form = served.client.get(asked.headers["location"]).text
    assert f'name="next" value="/agents/{agent_id}"' in form
    token = served.tokens[("acme", "viewer")]
    for where, lands in [(f"/agents/{agent_id}", f"/agents/{agent_id}"),
                         ("//evil.example/x", "/"), ("https://evil.example/", "/"),
                         ("/\\evil.example", "/"), ("", "/")]:  # fmt: skip
        served.client.cookies.clear()
        got = served.client.post("/login", data={"token": token, "next": where},
                                 follow_redirects=False)  # fmt: skip
        assert got.status_code == 303 and got.headers["location"] == lands, where


# -- secrets bound to where they may go (issue 26) -----------------------------------------


def _allow_endpoint(served: Served, base_url: str) -> None:
    """The tenant's policy names ``base_url`` as an endpoint its network specs may use:
    the model may go there, and the question left is which secrets may."""
    policy = f'@model_base_url("{base_url}")\npermit(principal, action, resource);\n'
    got = served.call("PUT", "/v1/policy", "acme", "admin", json={"text": policy})
    assert got.status_code == 200, got.text


def _spec_sending(key_secret: str, base_url: str) -> dict[str, Any]:
    return {"spec": {"name": "leak", "tools": ["read_file"], "model": {
        "provider": "openai", "name": "gpt-4o-mini", "base_url": base_url,
        "api_key_secret": key_secret, "max_retries": 0}}}  # fmt: skip


def test_an_operator_cannot_send_an_admin_s_secret_to_a_server_of_its_choosing(
    served: Served,
) -> None:
    token = "ghp_admins-own-token-0123456789"
    put = served.call("PUT", "/v1/secrets/GITHUB_TOKEN", "acme", "admin", json={"value": token})
    assert put.status_code == 204
    with FakeServer() as fake:
        fake.default = Reply(200, openai_answer([openai_call("c1", "finish", {"summary": "x"})]))
        _allow_endpoint(served, fake.url)  # say an admin let the tenant use a gateway of its own
        got = served.call("POST", "/v1/agents", "acme", "operator",
                          json=_spec_sending("GITHUB_TOKEN", fake.url))  # fmt: skip
        if got.status_code == 201:  # refused when the model is built, then: journaled
            agent_id = got.json()["agent_id"]
            run_until(served, agent_id, {"completed", "failed", "needs_attention", "waiting"})
            events = served.call("GET", f"/v1/agents/{agent_id}/events", "acme", "viewer").json()
            said = json.dumps(events["events"])
        else:
            assert got.status_code in (400, 403), got.text
            said = got.text
        # nor by giving an agent of its own that model
        agent_id = made(served, "waiter.yaml")
        swap = _spec_sending("GITHUB_TOKEN", fake.url)["spec"]["model"]
        swapped = served.call("PUT", f"/v1/agents/{agent_id}/model", "acme", "operator",
                              json={"model": swap})  # fmt: skip
        assert swapped.status_code == 400 and "GITHUB_TOKEN" in swapped.text, swapped.text
        run_until(served, agent_id, {"waiting"})
        assert not any(token in json.dumps(s.headers) for s in fake.seen)
        assert fake.seen == []
    assert "GITHUB_TOKEN" in said and "127.0.0.1" in said and "--to" in said, said


def test_a_secret_bound_to_a_host_goes_there_and_only_there(served: Served) -> None:
    token = "sk-local-model-key-0123456789"
    put = served.call("PUT", "/v1/secrets/LOCAL_KEY", "acme", "admin",
                      json={"value": token, "to": ["127.0.0.1"]})  # fmt: skip
    assert put.status_code == 204, put.text
    bad = served.call("PUT", "/v1/secrets/LOCAL_KEY", "acme", "admin",
                      json={"value": token, "to": ["http://x/"]})  # fmt: skip
    assert bad.status_code == 400 and "host" in bad.text
    with FakeServer() as fake:
        fake.default = Reply(200, openai_answer([openai_call("c1", "finish", {"summary": "x"})]))
        _allow_endpoint(served, fake.url)
        got = served.call("POST", "/v1/agents", "acme", "operator",
                          json=_spec_sending("LOCAL_KEY", fake.url))  # fmt: skip
        assert got.status_code == 201, got.text
        agent_id = got.json()["agent_id"]
        run_until(served, agent_id, {"completed", "failed", "needs_attention", "waiting"})
        assert fake.seen and fake.seen[0].headers["authorization"] == f"Bearer {token}"


def test_only_an_admin_forks_an_agent_with_its_grants(served: Served) -> None:
    """Keeping an agent's grants gives its fork authority, as importing an archive
    with its grants does: a network grant, which only an admin may give, must not
    reach a second agent through an operator's fork."""
    spec = {"name": "n", "model": {"provider": "openai", "name": "m"}, "tools": ["shell"],
            "scope": [{"tool": "shell"}, {"tool": "network"}]}  # fmt: skip
    made = served.call("POST", "/v1/agents", "acme", "admin", json={"spec": spec})
    assert made.status_code == 201, made.text
    agent_id = made.json()["agent_id"]
    fork = f"/v1/agents/{agent_id}/fork"
    for role in ("operator", "approver"):
        refused = served.call("POST", fork, "acme", role, json={"with_grants": True})
        assert refused.status_code == 409 and "admin" in refused.text, refused.text
    assert served.call("POST", fork, "acme", "operator", json={}).status_code < 300
    assert served.call("POST", fork, "acme", "admin", json={"with_grants": True}).status_code < 300


def test_deeply_nested_json_is_refused_not_a_server_error(served: Served) -> None:
    body = "[" * 100_000 + "]" * 100_000
    headers = {**served.as_("acme", "operator"), "content-type": "application/json"}
    got = served.client.request("POST", "/v1/agents", headers=headers, content=body)
    assert got.status_code == 400, got.text
    assert "nested" in got.json()["error"]["message"]
