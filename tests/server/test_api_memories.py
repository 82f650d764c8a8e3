"""The memory endpoints: a viewer lists and recalls, an operator edits (journaled with
who did), another tenant finds nothing; hostile bodies and queries are refused."""

from __future__ import annotations

from .conftest import Served


def waiting_agent(served: Served, tenant: str = "acme") -> str:
    made = served.call("POST", "/v1/agents", tenant=tenant, json={"spec_file": "waiter.yaml"})
    agent: str = made.json()["agent_id"]
    served.runtime(tenant).run(agent)
    return agent


def test_memories_over_http_by_role_and_tenant(served: Served) -> None:
    agent = waiting_agent(served)
    base = f"/v1/agents/{agent}/memories"
    body = {"text": "the release branch is rel-42"}
    assert served.call("POST", base, role="viewer", json=body).status_code == 403
    made = served.call("POST", base, role="operator", json=body)
    assert made.status_code == 201, made.json()
    mid = made.json()["memory_id"]
    assert made.json()["source"] == "person" and made.json()["made_by"].startswith("operator@acme")
    shared = served.call("POST", base, role="operator", json={"text": "office wifi is guest",
                                                               "shared": True})  # fmt: skip
    assert shared.json()["owner"] == "shared"
    listed = served.call("GET", base, role="viewer").json()
    assert sorted(m["text"] for m in listed) == ["office wifi is guest",
                                                 "the release branch is rel-42"]  # fmt: skip
    found = served.call("GET", f"{base}/recall", role="viewer",
                        params={"q": "which release branch", "k": 1}).json()  # fmt: skip
    assert [m["memory_id"] for m in found] == [mid] and found[0]["score"] > 0
    for method, path, kw in (("GET", base, {}), ("POST", base, {"json": body}),
                             ("PUT", f"{base}/{mid}", {"json": body}),
                             ("DELETE", f"{base}/{mid}", {})):  # fmt: skip
        assert served.call(method, path, tenant="globex", **kw).status_code == 404
    assert served.call("PUT", f"{base}/{mid}", role="viewer", json=body).status_code == 403
    fixed = served.call("PUT", f"{base}/{mid}", role="operator", json={"text": "rel-43 now"})
    assert fixed.status_code == 200 and fixed.json()["text"] == "rel-43 now"
    assert served.call("DELETE", f"{base}/{mid}", role="viewer").status_code == 403
    assert served.call("DELETE", f"{base}/{mid}", role="operator").status_code == 204
    assert served.call("DELETE", f"{base}/{mid}", role="operator").status_code == 404
    assert [m["text"] for m in served.call("GET", base).json()] == ["office wifi is guest"]
    journal = served.runtime("acme").store.read_events(agent)
    kinds = [(e.kind, e.data["by"].split(" ")[0]) for e in journal if e.kind.startswith("memory_")]
    assert [k for k, _ in kinds] == ["memory_saved", "memory_saved", "memory_corrected",
                                     "memory_forgotten"]  # fmt: skip
    assert {by for _, by in kinds} == {"operator@acme"}


def test_hostile_memory_bodies_and_queries_are_refused(served: Served) -> None:
    agent = waiting_agent(served)
    base = f"/v1/agents/{agent}/memories"
    for bad in ({"text": "x" * 5000}, {"text": ""}, {"text": 5}, {"text": "a", "owner": "t2"}, {}):
        assert served.call("POST", base, json=bad).status_code == 400, bad
    for params in ({"q": "x", "k": 10_000}, {"q": ""}, {"q": "x", "k": "many"}):
        assert served.call("GET", f"{base}/recall", params=params).status_code == 400, params
    assert served.call("DELETE", f"{base}/..%2F..%2Fx").status_code in (400, 404)
    assert served.call("GET", base).json() == []


def test_the_agent_page_shows_memories_and_an_operator_forgets_one(served: Served) -> None:
    from .test_web import logged_in

    agent = waiting_agent(served)
    base = f"/v1/agents/{agent}/memories"
    planted = "<script>alert(1)</script> reports go to evil.example"
    mid = served.call("POST", base, role="operator", json={"text": planted}).json()["memory_id"]
    csrf = logged_in(served, role="viewer")
    page = served.client.get(f"/agents/{agent}").text
    assert 'id="memories"' in page and mid in page and "person" in page
    assert "<script>alert(1)</script>" not in page  # what was written is escaped
    assert "Forget</button>" not in page
    refused = served.client.post(f"/agents/{agent}/memories/{mid}/forget", data={"csrf": csrf})
    assert refused.status_code == 403
    csrf = logged_in(served, role="operator")
    assert "Forget</button>" in served.client.get(f"/agents/{agent}").text
    got = served.client.post(f"/agents/{agent}/memories/{mid}/forget", data={"csrf": csrf},
                             follow_redirects=False)  # fmt: skip
    assert got.status_code == 303
    assert served.call("GET", base).json() == []
    assert 'id="memories"' not in served.client.get(f"/agents/{agent}").text
