"""The HTTP API: every route behind a token, each role held to its rank, each tenant
alone with its own agents, and the approval loop a person runs from a browser."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

import pytest
from openapi_spec_validator import validate

from stead.server import endpoints

from .conftest import Served

ORDER = {"read": "viewer", "operate": "operator", "approve": "approver", "govern": "admin"}


def made(served: Served, spec_file: str, tenant: str = "acme") -> str:
    got = served.call("POST", "/v1/agents", tenant, "operator", json={"spec_file": spec_file})
    assert got.status_code == 201, got.text
    return str(got.json()["agent_id"])


def run_until(served: Served, agent_id: str, statuses: set[str], tenant: str = "acme") -> str:
    got = served.call("POST", f"/v1/agents/{agent_id}/run", tenant, "operator")
    assert got.status_code == 202, got.text
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = served.call("GET", f"/v1/agents/{agent_id}", tenant, "viewer").json()
        if status["state"]["status"] in statuses and not served.server.running[agent_id].is_alive():
            return str(status["state"]["status"])
        time.sleep(0.05)
    pytest.fail(f"{agent_id} did not reach {statuses}")


def waiting_approval(served: Served, tenant: str = "acme") -> tuple[str, str]:
    agent_id = made(served, "approver.yaml", tenant)
    assert run_until(served, agent_id, {"waiting"}, tenant) == "waiting"
    [pending] = served.call("GET", "/v1/approvals", tenant, "viewer").json()
    return agent_id, str(pending["approval_id"])


def requests_for(served: Served, agent_id: str, approval_id: str) -> list[tuple[Any, ...]]:
    """A well-formed request for every endpoint, naming the agent's own objects."""
    state = served.runtime("acme").store.load_state(agent_id)
    names: dict[str, str] = defaultdict(lambda: "x_missing")
    names |= {"agent_id": agent_id, "approval_id": approval_id, "name": "API_KEY", "seq": "1",
              "grant_id": sorted(state.grants)[0], "call_id": "call_x", "violation_id": "v_x",
              "proposal_id": "prop_x", "snapshot_id": "snap_x", "goal_id": "g_x"}  # fmt: skip
    bodies = {
        "/v1/agents": {"spec_file": "waiter.yaml"},
        "/v1/agents/{agent_id}/messages": {"text": "hello"},
        "/v1/agents/{agent_id}/cancel": {"reason": "r"},
        "/v1/agents/{agent_id}/grants": {"grant": {"tool": "read_file"}, "reason": "r"},
        "/v1/approvals/{approval_id}/approve": {"valid_for_seconds": 60},
        "/v1/approvals/{approval_id}/deny": {"reason": "no"},
        "/v1/secrets/{name}": {"value": "s3cret-value"},
        "/v1/agents/{agent_id}/grants/{grant_id}": {"reason": "r"},
        "/v1/agents/{agent_id}/autonomy": {"level": "act_with_approval"},
        "/v1/policy": {"text": "permit(principal, action, resource);"},
        "/v1/agents/{agent_id}/calls/{call_id}/resolve": {"resolution": "done"},
        "/v1/agents/{agent_id}/violations/{violation_id}/clear": {"reason": "r"},
        "/v1/agents/{agent_id}/quarantine": {"seq": 1, "reason": "r"},
        "/v1/agents/{agent_id}/rollback": {"to_version": 1},
        "/v1/agents/{agent_id}/model": {"model": "openai:gpt-test"},
        "/v1/certificates/verify": {"certificate": {}},
        "/v1/agents/{agent_id}/upgrade": {"spec_file": "waiter.yaml", "dry_run": True},
        "/v1/agents/{agent_id}/memories": {"text": "the office moved to Lyon"},
        "/v1/agents/{agent_id}/memories/{memory_id}": {"text": "the office is in Lyon"},
    }
    out = []
    for e in endpoints():
        body = bodies.get(e.path, {} if e.body is not None else None)
        out.append((e, e.path.format_map(names), body))
    return out


def test_a_person_approves_for_a_window_and_the_agent_completes(served: Served) -> None:
    agent_id, approval_id = waiting_approval(served)
    [pending] = served.call("GET", "/v1/approvals", "acme", "viewer").json()
    assert pending["tool"] == "write_file" and pending["args"]["content"] == "hello"
    got = served.call("POST", f"/v1/approvals/{approval_id}/approve", "acme", "approver",
                      json={"valid_for_seconds": 900})  # fmt: skip
    assert got.status_code == 200, got.text
    assert got.json()["by"].startswith("approver@acme (token tok_")
    # answered once: a second answer is refused
    again = served.call("POST", f"/v1/approvals/{approval_id}/deny", "acme", "approver",
                        json={"reason": "late"})  # fmt: skip
    assert again.status_code == 404 and "no approval" in again.json()["error"]["message"]
    assert run_until(served, agent_id, {"completed"}) == "completed"
    page = served.call("GET", f"/v1/agents/{agent_id}/events?limit=3", "acme", "viewer").json()
    assert [e["seq"] for e in page["events"]] == [1, 2, 3] and page["next"] == 3
    everything = served.call("GET", f"/v1/agents/{agent_id}/events", "acme", "viewer").json()
    granted = [e for e in everything["events"] if e["kind"] == "approval_granted"]
    assert granted and granted[0]["data"]["by"].startswith("approver@acme")
    assert everything["next"] is None
    audit = served.call("GET", f"/v1/agents/{agent_id}/audit", "acme", "viewer").json()
    assert audit["ok"] is True and audit["events"] == len(everything["events"])


def test_a_denial_reaches_the_agent_with_its_reason(served: Served) -> None:
    agent_id, approval_id = waiting_approval(served)
    got = served.call("POST", f"/v1/approvals/{approval_id}/deny", "acme", "approver",
                      json={"reason": "not on a Friday"})  # fmt: skip
    assert got.status_code == 200, got.text
    run_until(served, agent_id, {"completed", "failed", "needs_attention", "waiting"})
    events = served.call("GET", f"/v1/agents/{agent_id}/events", "acme", "viewer").json()
    texts = json.dumps(events["events"])
    assert "not on a Friday" in texts
    assert not (served.server.data_dir / "workspaces" / "acme" / agent_id / "out.txt").exists()


def test_the_journal_streams_as_server_sent_events_and_resumes(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    path = f"/v1/agents/{agent_id}/stream"

    def first(n: int, headers: dict[str, str]) -> list[tuple[int, str, dict[str, Any]]]:
        got: list[tuple[int, str, dict[str, Any]]] = []
        with served.client.stream("GET", path, headers=headers) as answer:
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            frame: dict[str, str] = {}
            for line in answer.iter_lines():
                if not line:
                    if "id" in frame:
                        got.append((int(frame["id"]), frame["event"], json.loads(frame["data"])))
                    frame = {}
                    if len(got) == n:
                        return got
                    continue
                key, _, value = line.partition(": ")
                frame[key] = value
        return got

    viewer = served.as_("acme", "viewer")
    events = first(3, viewer)
    assert [(seq, kind) for seq, kind, _ in events][:1] == [(1, "agent_created")]
    assert [seq for seq, _, _ in events] == [1, 2, 3]
    resumed = first(2, {**viewer, "last-event-id": "3"})
    assert [seq for seq, _, _ in resumed] == [4, 5]
    assert resumed[0][2]["seq"] == 4
    bad = served.client.get(path, headers={**viewer, "last-event-id": "x1"})
    assert bad.status_code == 400


def test_the_openapi_document_is_valid_and_lists_every_endpoint(served: Served) -> None:
    doc = served.client.get("/v1/openapi.json").json()
    validate(doc)
    assert doc["openapi"] == "3.1.0"
    for e in endpoints():
        op = doc["paths"][e.path][e.method.lower()]
        assert ORDER[e.action] in op["description"]
    assert served.client.get("/v1/health").json()["ok"] is True
    missing = served.client.get("/v1/nowhere", headers=served.as_("acme", "viewer"))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "no_such_route"
