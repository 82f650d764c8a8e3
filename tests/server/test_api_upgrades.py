"""Upgrades over HTTP: a new spec from the spec folder or the body, its plan, its
rollback, the versions listed; the roles and the network allowlist hold."""

from __future__ import annotations

from .conftest import Served, write_spec
from .test_api import made


def test_an_operator_upgrades_and_rolls_back_over_http(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    write_spec(served.specs, "waiter2", [{"wait_for_input": "go?"}], instructions="Be brief.",
               tools=["read_file", "write_file", "list_files"])  # fmt: skip
    path = f"/v1/agents/{agent_id}/upgrade"
    plan = served.call("POST", path, role="operator",
                       json={"spec_file": "waiter2.yaml", "dry_run": True})  # fmt: skip
    assert plan.status_code == 200, plan.text
    assert not plan.json()["applied"]
    assert {c["field"] for c in plan.json()["changes"]} >= {"instructions", "name"}
    done = served.call("POST", path, role="operator",
                       json={"spec_file": "waiter2.yaml", "reason": "brevity"})  # fmt: skip
    assert done.status_code == 200 and done.json()["applied"], done.text
    rt = served.runtime("acme")
    assert rt.store.get_record(agent_id).spec["instructions"] == "Be brief."
    rows = served.call("GET", f"/v1/agents/{agent_id}/spec-versions", role="viewer").json()
    assert [(r["kind"], r["reason"]) for r in rows] == [("agent_created", ""),
                                                        ("upgrade", "brevity")]  # fmt: skip
    back = served.call("POST", f"/v1/agents/{agent_id}/upgrade/rollback", role="operator",
                       json={})  # fmt: skip
    assert back.status_code == 200 and back.json()["to"] == rows[0]["digest"], back.text
    assert rt.store.get_record(agent_id).spec["instructions"] == ""


def test_widening_over_http_needs_an_admin_token(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    write_spec(served.specs, "wider", [{"wait_for_input": "go?"}],
               tools=["read_file", "write_file", "list_files", "shell"])  # fmt: skip
    path = f"/v1/agents/{agent_id}/upgrade"
    got = served.call("POST", path, role="operator", json={"spec_file": "wider.yaml"})
    assert got.status_code == 409, got.text
    assert "adds the tool shell" in got.json()["error"]["message"]
    assert "shell" not in served.runtime("acme").store.get_record(agent_id).spec["tools"]
    got = served.call("POST", path, role="admin", json={"spec_file": "wider.yaml"})
    assert got.status_code == 200, got.text
    assert "shell" in served.runtime("acme").store.get_record(agent_id).spec["tools"]


def test_the_agent_s_page_shows_its_spec_versions(served: Served) -> None:
    from .test_web import logged_in

    agent_id = made(served, "waiter.yaml")
    page = "/agents/" + agent_id
    logged_in(served, role="viewer")
    assert 'id="spec-versions"' not in served.client.get(page).text  # one version only
    write_spec(served.specs, "waiter2", [{"wait_for_input": "go?"}], instructions="Be brief.",
               tools=["read_file", "write_file", "list_files"])  # fmt: skip
    done = served.call(
        "POST",
        f"/v1/agents/{agent_id}/upgrade",
        role="operator",
        json={"spec_file": "waiter2.yaml", "reason": "brevity <b>now</b>"},
    )
    text = served.client.get(page).text
    assert 'id="spec-versions"' in text and done.json()["to"][:12] in text
    assert "instructions" in text and "brevity &lt;b&gt;now&lt;/b&gt;" in text
    assert "spec upgraded" in text  # the timeline's line for the event
    # each event's page says which version of the spec was in force when it came
    first = served.client.get(f"{page}/events/1").text
    assert f"under spec version {done.json()['from'][:12]}" in first
    sent = served.call("POST", f"/v1/agents/{agent_id}/messages", role="operator",
                       json={"text": "hello"})  # fmt: skip
    assert sent.status_code < 300, sent.text
    last = served.runtime("acme").store.load_state(agent_id).version
    after = served.client.get(f"{page}/events/{last}").text
    assert f"under spec version {done.json()['to'][:12]}" in after


def test_a_provider_s_model_is_asked_with_the_spec_an_upgrade_over_http_gave(
    served: Served,
) -> None:
    from ..models.fake_servers import FakeServer, Reply, calls_in, openai_answer, openai_call
    from .test_api import run_until

    key = "sk-local-model-key-0123456789"
    put = served.call("PUT", "/v1/secrets/LOCAL_KEY", json={"value": key, "to": ["127.0.0.1"]})
    assert put.status_code == 204, put.text
    ask = Reply(200, openai_answer([openai_call("c1", "wait_for_input", {"prompt": "more?"})]))
    with FakeServer() as fake:
        fake.default = ask
        policy = f'@model_base_url("{fake.url}")\npermit(principal, action, resource);\n'
        assert served.call("PUT", "/v1/policy", json={"text": policy}).status_code == 200
        model = {"provider": "openai", "name": "gpt-4o-mini", "base_url": fake.url,
                 "api_key_secret": "LOCAL_KEY", "max_retries": 0}  # fmt: skip
        v1 = {"name": "asker", "instructions": "Speak English.", "tools": ["read_file"],
              "model": model}  # fmt: skip
        got = served.call("POST", "/v1/agents", role="operator", json={"spec": v1})
        assert got.status_code == 201, got.text
        agent_id = got.json()["agent_id"]
        assert run_until(served, agent_id, {"waiting"}) == "waiting"
        assert "Speak English." in str(fake.seen[-1].body["messages"][0]["content"])
        v2 = {**v1, "instructions": "Speak French.", "tools": ["read_file", "list_files"]}
        up = served.call("POST", f"/v1/agents/{agent_id}/upgrade", role="admin",
                         json={"spec": v2, "reason": "French"})  # fmt: skip
        assert up.status_code == 200 and up.json()["applied"], up.text
        sent = served.call("POST", f"/v1/agents/{agent_id}/messages", role="operator",
                           json={"text": "bonjour"})  # fmt: skip
        assert sent.status_code < 300, sent.text
        assert run_until(served, agent_id, {"waiting"}) == "waiting"
        last = fake.seen[-1].body
        assert "Speak French." in str(last["messages"][0]["content"])
        assert "list_files" in set(calls_in(last))
        assert fake.seen[-1].headers["authorization"] == f"Bearer {key}"
