"""The web page: a person logs in with a token, finds an agent waiting, answers it once,
and watches it; forms carry CSRF tokens; nothing an agent wrote runs in the page."""

from __future__ import annotations

import re

import pytest

from .conftest import Served, write_spec
from .test_api import made, run_until, waiting_approval


def logged_in(served: Served, tenant: str = "acme", role: str = "approver") -> str:
    """Log the test client in; return the session's CSRF token (from a page's form)."""
    served.client.cookies.clear()
    got = served.client.post("/login", data={"token": served.tokens[(tenant, role)]},
                             follow_redirects=False)  # fmt: skip
    assert got.status_code == 303 and got.headers["location"] == "/"
    cookie = got.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    page = served.client.get("/")
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_a_person_approves_from_the_inbox_for_a_window_once(served: Served) -> None:
    agent_id, approval_id = waiting_approval(served)
    csrf = logged_in(served)
    inbox = served.client.get("/approvals")
    assert approval_id in inbox.text and "write_file" in inbox.text and "hello" in inbox.text
    # without the form's CSRF token nothing is done
    forged = served.client.post(f"/approvals/{approval_id}/approve",
                                data={"valid_for": "15 minutes"})  # fmt: skip
    assert forged.status_code == 403
    assert served.call("GET", "/v1/approvals", "acme", "viewer").json()[0]["approval_id"] == (
        approval_id
    )
    got = served.client.post(f"/approvals/{approval_id}/approve",
                             data={"valid_for": "15 minutes", "csrf": csrf})  # fmt: skip
    assert got.status_code == 200 and f"Approved {approval_id}" in got.text
    assert served.call("GET", "/v1/approvals", "acme", "viewer").json() == []
    again = served.client.post(f"/approvals/{approval_id}/deny",
                               data={"reason": "late", "csrf": csrf})  # fmt: skip
    assert again.status_code == 404 and "no approval" in again.text
    assert run_until(served, agent_id, {"completed"}) == "completed"
    timeline = served.client.get(f"/agents/{agent_id}")
    assert "approval granted" in timeline.text and "approver@acme" in timeline.text
    assert "files: out.txt" in timeline.text and "completed" in timeline.text


def test_a_denial_from_the_page_reaches_the_agent(served: Served) -> None:
    agent_id, approval_id = waiting_approval(served)
    csrf = logged_in(served)
    got = served.client.post(f"/approvals/{approval_id}/deny",
                             data={"reason": "not today", "csrf": csrf})  # fmt: skip
    assert got.status_code == 200
    run_until(served, agent_id, {"completed", "failed", "needs_attention", "waiting"})
    assert "not today" in served.client.get(f"/agents/{agent_id}").text


@pytest.mark.parametrize("path", ["/", "/approvals", "/login"])
def test_pages_fit_a_phone_s_width(served: Served, path: str) -> None:
    if path != "/login":
        logged_in(served)
    page = served.client.get(path).text
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert "@media (max-width: 640px)" in page


def test_an_agent_s_page_shows_scope_snapshots_certificate_and_provenance(
    served: Served,
) -> None:
    write_spec(served.specs, "reader", [
        {"tool": "write_file", "args": {"path": "a.txt", "content": "one"}},
        {"tool": "read_file", "args": {"path": "a.txt"}},
        {"wait_for_input": "more?"},
        {"finish": "read it"},
    ])  # fmt: skip
    agent_id = made(served, "reader.yaml")
    run_until(served, agent_id, {"waiting"})
    served.call("POST", f"/v1/agents/{agent_id}/grants", "acme", "admin",
                json={"grant": {"tool": "list_files", "valid_for": 3600}})  # fmt: skip
    snap = served.call("POST", f"/v1/agents/{agent_id}/hibernate", "acme", "operator", json={})
    served.call("POST", f"/v1/snapshots/{snap.json()['snapshot_id']}/restore", "acme",
                "operator", json={})  # fmt: skip
    served.call("POST", f"/v1/agents/{agent_id}/messages", "acme", "operator", json={"text": "no"})
    run_until(served, agent_id, {"completed"})
    logged_in(served, role="viewer")
    page = served.client.get(f"/agents/{agent_id}").text
    assert "<strong>Scope</strong> · autonomy act_autonomously" in page
    assert "list_files" in page and "until 20" in page  # the grant's window
    assert snap.json()["snapshot_id"] in page
    assert 'id="certificate"' in page and "completion_certificate" in page
    events = served.call("GET", f"/v1/agents/{agent_id}/events", "acme", "viewer").json()
    [result] = [e["seq"] for e in events["events"]
                if e["kind"] == "tool_result" and e["data"]["tool"] == "write_file"]  # fmt: skip
    assert f'href="/agents/{agent_id}/events/{result}"' in page
    detail = served.client.get(f"/agents/{agent_id}/events/{result}")
    assert detail.status_code == 200 and "What depends on it" in detail.text
    graph = served.runtime("acme").provenance(agent_id)
    for node in graph.impact(result):
        assert f'href="/agents/{agent_id}/events/{node.seq}"' in detail.text
    assert served.client.get(f"/agents/{agent_id}/events/99999").status_code == 404


def test_a_violation_is_cleared_from_the_page_by_an_approver_with_a_reason(
    served: Served,
) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    # a person flags a result: the agent is suspended with an open violation
    events = served.call("GET", f"/v1/agents/{agent_id}/events", "acme", "viewer").json()
    first = events["events"][0]["seq"]
    served.call("POST", f"/v1/agents/{agent_id}/quarantine", "acme", "approver",
                json={"seq": first, "reason": "bad input"})  # fmt: skip
    state = served.call("GET", f"/v1/agents/{agent_id}", "acme", "viewer").json()["state"]
    [vid] = list(state["violations"])
    csrf = logged_in(served, role="viewer")
    page = served.client.get(f"/agents/{agent_id}").text
    assert vid in page and "Clear</button>" not in page
    refused = served.client.post(f"/agents/{agent_id}/violations/{vid}/clear",
                                 data={"reason": "fine", "csrf": csrf})  # fmt: skip
    assert refused.status_code == 403
    csrf = logged_in(served, role="approver")
    assert "Clear</button>" in served.client.get(f"/agents/{agent_id}").text
    got = served.client.post(f"/agents/{agent_id}/violations/{vid}/clear",
                             data={"reason": "checked by hand", "csrf": csrf})  # fmt: skip
    assert got.status_code == 200
    state = served.call("GET", f"/v1/agents/{agent_id}", "acme", "viewer").json()["state"]
    assert vid not in state["violations"]
    cleared = [e for e in served.call("GET", f"/v1/agents/{agent_id}/events", "acme",
               "viewer").json()["events"] if e["kind"] == "violation_cleared"]  # fmt: skip
    assert cleared[0]["data"]["reason"] == "checked by hand"
    assert cleared[0]["data"]["by"].startswith("approver@acme")
