"""The schedule endpoints and page: roles, tenants, specs held as creation holds them."""

from __future__ import annotations

import time

from stead.schedules import fire_due
from stead.store.schedule_rows import ScheduleRows

from .conftest import Served


def waiting_agent(served: Served, tenant: str = "acme") -> str:
    made = served.call("POST", "/v1/agents", tenant=tenant, json={"spec_file": "waiter.yaml"})
    agent: str = made.json()["agent_id"]
    served.runtime(tenant).run(agent)
    return agent


def test_an_operator_schedules_an_agent_a_viewer_lists_another_tenant_sees_nothing(
    served: Served,
) -> None:
    agent = waiting_agent(served)
    body = {"agent_id": agent, "every": "1h", "message": "check the inbox", "jitter": 30}
    refused = served.call("POST", "/v1/schedules", role="viewer", json=body)
    assert refused.status_code == 403
    made = served.call("POST", "/v1/schedules", role="operator", json=body)
    assert made.status_code == 201, made.json()
    shown = made.json()
    assert shown["agent_id"] == agent and shown["when"] == "every 1h" and not shown["paused"]
    assert len(shown["upcoming"]) == 3 and shown["upcoming"][0] > time.time()
    sid = shown["schedule_id"]
    listed = served.call("GET", "/v1/schedules", role="viewer").json()
    assert [s["schedule_id"] for s in listed] == [sid]
    assert served.call("GET", "/v1/schedules", tenant="globex").json() == []
    for method, path in (("GET", f"/v1/schedules/{sid}"), ("POST", f"/v1/schedules/{sid}/pause"),
                         ("DELETE", f"/v1/schedules/{sid}")):  # fmt: skip
        other = served.call(method, path, tenant="globex")
        assert other.status_code == 404 and "no schedule" in other.json()["error"]["message"]
    # another tenant's agent cannot be scheduled either
    theirs = served.call("POST", "/v1/schedules", tenant="globex", json=body)
    assert theirs.status_code == 404
    paused = served.call("POST", f"/v1/schedules/{sid}/pause", role="operator").json()
    assert paused["paused"] and paused["upcoming"] == []
    assert served.call("POST", f"/v1/schedules/{sid}/resume", role="viewer").status_code == 403
    resumed = served.call("POST", f"/v1/schedules/{sid}/resume", role="operator").json()
    assert not resumed["paused"]
    detail = served.call("GET", f"/v1/schedules/{sid}", role="viewer").json()
    assert detail["schedule"]["schedule_id"] == sid and detail["firings"] == []
    journal = served.runtime("acme").store.read_events(agent)
    changes = [(e.kind, e.data.get("change"), e.data["by"].split(" ")[0]) for e in journal
               if e.kind.startswith("schedule_")]  # fmt: skip
    assert changes == [("schedule_set", None, "operator@acme"),
                       ("schedule_changed", "paused", "operator@acme"),
                       ("schedule_changed", "resumed", "operator@acme")]  # fmt: skip
    assert served.call("DELETE", f"/v1/schedules/{sid}", role="operator").status_code == 204
    assert served.call("GET", "/v1/schedules").json() == []


def test_a_schedule_of_fresh_agents_takes_a_spec_as_creation_does(served: Served) -> None:
    at = time.time() + 0.5
    made = served.call("POST", "/v1/schedules", json={"spec_file": "waiter.yaml", "at": at})
    assert made.status_code == 201, made.json()
    sid = made.json()["schedule_id"]
    assert made.json()["spec"] == "waiter" and made.json()["upcoming"] == [at]
    # a spec from the network is held to the allowlist: no Python tools
    bad = served.call(
        "POST",
        "/v1/schedules",
        json={
            "spec": {"name": "x", "model": "scripted:s.yaml", "tools": ["evil:tool"]},
            "every": "1h",
        },
    )
    assert bad.status_code == 400
    time.sleep(max(0.0, at - time.time()) + 0.05)
    report = fire_due(served.runtime("acme"))
    assert [s for s, _, _ in report.delivered] == [sid]
    agent = report.delivered[0][2]
    assert agent is not None
    assert served.call("GET", f"/v1/agents/{agent}").json()["name"] == "waiter"
    rows = served.server.store
    assert isinstance(rows, ScheduleRows)
    assert rows.get_schedule(sid).next_due is None  # type: ignore[union-attr]


def test_bad_schedules_are_refused_with_what_to_do(served: Served) -> None:
    agent = waiting_agent(served)
    for body, words in (
        ({"agent_id": agent, "every": "1h"}, "needs a message"),
        ({"agent_id": agent, "cron": "0 25 * * *", "message": "x"}, "0 to 23"),
        ({"agent_id": agent, "every": "1h", "message": "x", "overlap": "never"}, "overlap"),
        ({"agent_id": agent, "spec_file": "waiter.yaml", "every": "1h"}, "is valid under each of"),
        ({"agent_id": agent, "every": "1h", "message": "x", "owner": "me"}, "Additional"),
    ):
        got = served.call("POST", "/v1/schedules", json=body)
        assert got.status_code == 400, body
        assert words in got.json()["error"]["message"], (body, got.json())


def test_the_page_lists_the_tenants_schedules_and_pauses_them(served: Served) -> None:
    agent = waiting_agent(served)
    made = served.call("POST", "/v1/schedules", json={
        "agent_id": agent, "cron": "0 9 * * mon-fri", "tz": "Europe/Paris", "message": "standup",
        "name": "<b>morning</b>"}).json()  # fmt: skip
    other = waiting_agent(served, "globex")
    served.call("POST", "/v1/schedules", tenant="globex",
                json={"agent_id": other, "every": "1h", "message": "theirs"})  # fmt: skip
    login = served.client.post("/login", data={"token": served.tokens[("acme", "operator")]},
                               follow_redirects=False)  # fmt: skip
    assert login.status_code == 303
    page = served.client.get("/schedules")
    assert page.status_code == 200
    assert made["schedule_id"] in page.text and "Europe/Paris" in page.text
    assert "&lt;b&gt;morning&lt;/b&gt;" in page.text and other not in page.text
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    paused = served.client.post(f"/schedules/{made['schedule_id']}/pause", data={"csrf": csrf},
                                follow_redirects=False)  # fmt: skip
    assert paused.status_code == 303
    assert served.call("GET", f"/v1/schedules/{made['schedule_id']}").json()["schedule"]["paused"]
    forged = served.client.post(f"/schedules/{made['schedule_id']}/resume", data={"csrf": "x"},
                                follow_redirects=False)  # fmt: skip
    assert forged.status_code == 403
