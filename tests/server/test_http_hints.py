"""A spec sent over HTTP names a provider's model as text (``openai:gpt-4o-mini``), as
a spec file does; and a 404 tells an HTTP caller the API route, not a command."""

from __future__ import annotations

import pytest

from .conftest import Served


@pytest.mark.parametrize("model", ["openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5"])
def test_an_inline_spec_names_a_providers_model_as_text(served: Served, model: str) -> None:
    spec = {"name": "helper", "model": model, "instructions": "Say hello."}
    got = served.call("POST", "/v1/agents", json={"spec": spec})
    assert got.status_code == 201, got.text
    agent_id = got.json()["agent_id"]
    state = served.call("GET", f"/v1/agents/{agent_id}").json()
    assert state["name"] == "helper"


def test_a_model_is_set_over_http_as_text(served: Served) -> None:
    spec = {"name": "helper", "model": {"provider": "openai", "name": "m"}}
    agent_id = served.call("POST", "/v1/agents", json={"spec": spec}).json()["agent_id"]
    got = served.call("PUT", f"/v1/agents/{agent_id}/model", json={"model": "anthropic:claude-x"})
    assert got.status_code == 200, got.text


@pytest.mark.parametrize(
    ("method", "path", "route"),
    [
        ("GET", "/v1/agents/ag_nosuch", "GET /v1/agents lists them"),
        ("POST", "/v1/approvals/apr_nosuch/approve", "GET /v1/approvals lists them"),
        ("POST", "/v1/snapshots/snap_nosuch/restore", "GET /v1/agents/{agent_id}/snapshots"),
    ],
)
def test_a_404_tells_the_api_route_not_a_command(
    served: Served, method: str, path: str, route: str
) -> None:
    got = served.call(method, path, json={"valid_for_seconds": 60} if "approve" in path else {})
    assert got.status_code == 404, got.text
    message = got.json()["error"]["message"]
    assert route in message and "`stead" not in message


def test_a_spec_over_http_may_say_what_a_text_answer_is(served: Served) -> None:
    spec = {"name": "talker", "model": "openai:gpt-4o-mini", "on_text": "finish"}
    got = served.call("POST", "/v1/agents", json={"spec": spec})
    assert got.status_code == 201, got.text
    bad = served.call("POST", "/v1/agents", json={"spec": {**spec, "on_text": "shout"}})
    assert bad.status_code == 400 and "on_text" in bad.json()["error"]["message"]


def test_the_api_lists_approvals_with_what_a_person_needs_to_decide(served: Served) -> None:
    from .test_api import waiting_approval

    agent_id, approval_id = waiting_approval(served)
    (a,) = served.call("GET", "/v1/approvals", "acme", "viewer").json()
    assert a["approval_id"] == approval_id and a["agent"]["id"] == agent_id
    assert a["agent"]["name"] == "approver"
    assert set(a["origins"]) == set(a["args"]) and a["change"].startswith("--- /dev/null")
    assert a["valid"]["holds"] is True and a["waited"] >= 0
