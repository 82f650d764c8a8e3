"""Cancel and delete over HTTP: roles, tenants, and what is left afterwards."""

from __future__ import annotations

from .conftest import Served
from .test_api import made, run_until, waiting_approval


def test_an_operator_cancels_an_agent_and_its_approval_leaves_the_inbox(served: Served) -> None:
    agent_id, approval = waiting_approval(served)
    path = f"/v1/agents/{agent_id}/cancel"
    refused = served.call("POST", path, "acme", "viewer", json={"reason": "stop"})
    assert refused.status_code == 403 and "operator" in refused.text
    missing = served.call("POST", path, "acme", "operator", json={})
    assert missing.status_code == 400 and "reason" in missing.text
    elsewhere = served.call("POST", path, "globex", "admin", json={"reason": "mine now"})
    assert elsewhere.status_code == 404
    got = served.call("POST", path, "acme", "operator", json={"reason": "wrong task"})
    assert got.status_code == 200, got.text
    assert got.json()["status"] == "cancelled"
    shown = served.call("GET", f"/v1/agents/{agent_id}", "acme", "viewer").json()
    assert shown["status"] == "cancelled"
    assert "operator@acme" in shown["state"]["status_reason"]
    assert "wrong task" in shown["state"]["status_reason"]
    assert served.call("GET", "/v1/approvals", "acme", "viewer").json() == []
    late = served.call("POST", f"/v1/approvals/{approval}/approve", "acme", "approver", json={})
    assert late.status_code in (400, 404, 409), late.text
    again = served.call("POST", path, "acme", "operator", json={"reason": "again"})
    assert again.status_code == 400 and "cancelled already" in again.text


def test_only_an_admin_deletes_and_only_its_own_tenant_s(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    path = f"/v1/agents/{agent_id}"
    assert served.call("DELETE", path, "acme", "approver").status_code == 403
    assert served.call("DELETE", path, "globex", "admin").status_code == 404
    got = served.call("DELETE", path, "acme", "admin")
    assert got.status_code == 200, got.text
    assert got.json()["agent_id"] == agent_id
    assert served.call("GET", path, "acme", "viewer").status_code == 404
    assert served.call("DELETE", path, "acme", "admin").status_code == 404
    workspace = served.server.data_dir / "workspaces" / "acme" / agent_id
    assert not workspace.exists()
