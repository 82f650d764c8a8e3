"""Boundary: ending agents — cancel, delete and collection (docs/security.md).

These are the destructive requests: a hostile tenant, a token of too low a
role, or a page on another site tries to end or erase what is not theirs.
What must never happen: another tenant's agent is cancelled, deleted or
learnt of; another tenant's finished agents or blobs are collected; a role
below operator cancels or below admin deletes or collects; a form elsewhere
makes a logged-in browser delete an agent; and content that any agent, journal
version or snapshot still names is collected.
"""

from __future__ import annotations

from stead import Runtime
from stead.snapshots import retention

from ..server import conftest as server_fixtures
from ..server.conftest import VAULT_KEY, Served
from ..server.test_api import made, run_until
from ..server.test_web import logged_in

served = server_fixtures.served


def test_another_tenant_can_neither_end_nor_see_an_agent(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    for method, path, body in (
        ("POST", f"/v1/agents/{agent_id}/cancel", {"reason": "mine now"}),
        ("DELETE", f"/v1/agents/{agent_id}", None),
    ):
        got = served.call(method, path, "globex", "admin", json=body)
        assert got.status_code == 404, got.text
        assert agent_id in got.text  # told only "not found", as for an id never made
    shown = served.call("GET", f"/v1/agents/{agent_id}", "acme", "viewer").json()
    assert shown["status"] == "waiting"


def test_roles_below_the_one_needed_are_refused_and_nothing_changes(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    assert served.call("POST", f"/v1/agents/{agent_id}/cancel", "acme", "viewer",
                       json={"reason": "x"}).status_code == 403  # fmt: skip
    for role in ("viewer", "operator", "approver"):
        assert served.call("DELETE", f"/v1/agents/{agent_id}", "acme", role).status_code == 403
        assert served.call("POST", "/v1/gc", "acme", role,
                           json={"finished_older_than_days": 0}).status_code == 403  # fmt: skip
    assert served.call("GET", f"/v1/agents/{agent_id}", "acme", "viewer").status_code == 200


def test_a_form_elsewhere_cannot_make_a_logged_in_browser_delete(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    logged_in(served, "acme", "admin")
    for form in ({"confirm": agent_id}, {"confirm": agent_id, "csrf": "guessed"}):
        got = served.client.post(f"/agents/{agent_id}/delete", data=form)
        assert got.status_code == 403, got.text
        got = served.client.post(f"/agents/{agent_id}/cancel", data={**form, "reason": "x"})
        assert got.status_code == 403, got.text
        got = served.client.post("/gc", data={**form, "days": "0"})
        assert got.status_code == 403, got.text
    assert served.call("GET", f"/v1/agents/{agent_id}", "acme", "viewer").status_code == 200


def test_a_tenant_s_collection_leaves_other_tenants_agents_and_blobs(served: Served) -> None:
    ours, theirs = made(served, "waiter.yaml", "acme"), made(served, "waiter.yaml", "globex")
    for tenant, agent_id in (("acme", ours), ("globex", theirs)):
        run_until(served, agent_id, {"waiting"}, tenant)
        served.call("POST", f"/v1/agents/{agent_id}/cancel", tenant, "operator",
                    json={"reason": "done with it"})  # fmt: skip
    mine = Runtime(served.server.store, served.server.data_dir, tenant="acme",
                   secret_key=VAULT_KEY)  # fmt: skip
    loose = mine.blobs("acme").put(b"acme's, named by nothing")
    kept = served.runtime("globex").blobs("globex").put(b"globex's, named by nothing")
    got = served.call("POST", "/v1/gc", "globex", "admin", json={"finished_older_than_days": 0})
    assert got.status_code == 200, got.text
    assert got.json()["agents"] == [theirs]
    assert served.call("GET", f"/v1/agents/{ours}", "acme", "viewer").status_code == 200
    # a tenant's own collection, with no grace, reaches only its own blobs
    done = retention.gc(served.runtime("globex"), None, grace=0, tenant="globex")
    assert done["blobs"] >= 1
    assert not served.runtime("globex").blobs("globex").has(kept)
    assert mine.blobs("acme").has(loose)
