"""The API's routes for scope, autonomy, policy, people's decisions, hibernation,
forks, certificates, provenance and rollback: each does what its command does."""

from __future__ import annotations

import hashlib

from .conftest import Served, write_spec
from .test_api import made, run_until


def test_scope_grants_autonomy_and_policy(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    scope = served.call("GET", f"/v1/agents/{agent_id}/scope", "acme", "viewer").json()
    assert scope["autonomy"] == "act_autonomously" and scope["policy_version"] == 0
    grant = next(g for g in scope["grants"] if g["tool"] == "write_file")
    assert grant["inactive"] is None
    got = served.call("DELETE", f"/v1/agents/{agent_id}/grants/{grant['id']}", "acme", "admin",
                      json={"reason": "no more writing"})  # fmt: skip
    assert got.status_code == 200, got.text
    scope = served.call("GET", f"/v1/agents/{agent_id}/scope", "acme", "viewer").json()
    assert grant["id"] not in [g["id"] for g in scope["grants"]]
    got = served.call("PUT", f"/v1/agents/{agent_id}/autonomy", "acme", "admin",
                      json={"level": "act_with_approval", "tool": "read_file"})  # fmt: skip
    assert got.status_code == 200, got.text
    scope = served.call("GET", f"/v1/agents/{agent_id}/scope", "acme", "viewer").json()
    assert scope["tool_autonomy"] == {"read_file": "act_with_approval"}
    bad = served.call("PUT", f"/v1/agents/{agent_id}/autonomy", "acme", "admin",
                      json={"level": "anything goes"})  # fmt: skip
    assert bad.status_code == 400
    none = served.call("GET", "/v1/policy", "acme", "viewer")
    assert none.status_code == 404 and "has no policy" in none.json()["error"]["message"]
    text = "permit(principal, action, resource);\n"
    put = served.call("PUT", "/v1/policy", "acme", "admin", json={"text": text})
    assert put.status_code == 200 and put.json() == {"tenant": "acme", "version": 1}, put.text
    shown = served.call("GET", "/v1/policy", "acme", "viewer").json()
    assert shown["text"] == text and shown["set_by"].startswith("admin@acme")
    assert served.call("GET", "/v1/policy", "globex", "viewer").status_code == 404
    broken = served.call("PUT", "/v1/policy", "acme", "admin", json={"text": "permit("})
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "policy_error"


def test_decisions_that_name_nothing_open_are_refused_in_the_cli_s_words(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    for path, body, needle in [
        (f"/v1/agents/{agent_id}/violations/v_none/clear", {"reason": "ok"}, "no open violation"),
        (f"/v1/agents/{agent_id}/calls/call_none/resolve", {"resolution": "done"}, "call_none"),
        (f"/v1/agents/{agent_id}/proposals/prop_none/accept", {}, "no open proposal"),
    ]:
        got = served.call("POST", path, "acme", "approver", json=body)
        assert 400 <= got.status_code < 500 and needle in got.json()["error"]["message"], got.text


def test_hibernate_wake_restore_once_and_fork(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    snap = served.call("POST", f"/v1/agents/{agent_id}/hibernate", "acme", "operator", json={})
    assert snap.status_code == 200, snap.text
    snapshot_id = snap.json()["snapshot_id"]
    listed = served.call("GET", f"/v1/agents/{agent_id}/snapshots", "acme", "viewer").json()
    assert [s["snapshot_id"] for s in listed] == [snapshot_id]
    assert (
        served.call("GET", f"/v1/agents/{agent_id}", "acme", "viewer").json()["state"]["status"]
        == "hibernated"
    )
    woke = served.call("POST", f"/v1/snapshots/{snapshot_id}/restore", "acme", "operator",
                       json={})  # fmt: skip
    assert woke.status_code == 200 and woke.json()["status"] == "waiting", woke.text
    twice = served.call("POST", f"/v1/snapshots/{snapshot_id}/restore", "acme", "operator",
                        json={})  # fmt: skip
    assert twice.status_code in (400, 409), twice.text
    assert served.call("POST", f"/v1/snapshots/{snapshot_id}/restore", "globex", "admin",
                       json={}).status_code == 404  # fmt: skip
    fork = served.call("POST", f"/v1/agents/{agent_id}/fork", "acme", "operator",
                       json={"name": "copy"})  # fmt: skip
    assert fork.status_code == 201, fork.text
    forked = served.call("GET", f"/v1/agents/{fork.json()['agent_id']}", "acme", "viewer").json()
    assert forked["name"] == "copy" and forked["tenant"] == "acme"


def test_certificate_check_provenance_quarantine_and_rollback(served: Served) -> None:
    write_spec(served.specs, "two", [{"tool": "write_file", "args": {"path": "a.txt",
               "content": "one"}}, {"tool": "read_file", "args": {"path": "a.txt"}},
               {"finish": "read it"}])  # fmt: skip
    agent_id = made(served, "two.yaml")
    assert run_until(served, agent_id, {"completed"}) == "completed"
    cert = served.call("GET", f"/v1/agents/{agent_id}/certificate", "acme", "viewer")
    assert cert.status_code == 200 and cert.json()["agent_id"] == agent_id
    check = served.call("GET", f"/v1/agents/{agent_id}/check", "acme", "viewer").json()
    assert check["same_as_live"] is True
    events = served.call("GET", f"/v1/agents/{agent_id}/events", "acme", "viewer").json()
    results = [e["seq"] for e in events["events"] if e["kind"] == "tool_result"]
    graph = served.runtime("acme").provenance(agent_id)
    for which in ("impact", "lineage"):
        for seq in results:
            got = served.call("GET", f"/v1/agents/{agent_id}/{which}/{seq}", "acme", "viewer")
            expected = graph.impact(seq) if which == "impact" else graph.lineage(seq)
            assert got.status_code == 200 and got.json() == [n.to_json() for n in expected]
    nowhere = served.call("GET", f"/v1/agents/{agent_id}/lineage/99999", "acme", "viewer")
    assert nowhere.status_code == 400 and "no event 99999" in nowhere.text
    q = served.call("POST", f"/v1/agents/{agent_id}/quarantine", "acme", "approver",
                    json={"seq": results[0], "reason": "bad write"})  # fmt: skip
    assert q.status_code == 200, q.text
    assert q.json()["downstream"] == [n.seq for n in graph.impact(results[0])]
    before = min(e["seq"] for e in events["events"] if e["kind"] == "decision") - 1
    back = served.call("POST", f"/v1/agents/{agent_id}/rollback", "acme", "admin",
                       json={"to_version": before})  # fmt: skip
    assert back.status_code == 200, back.text
    assert "a.txt" in back.json()["restored_paths"]
    approver = served.call("POST", f"/v1/agents/{agent_id}/rollback", "acme", "approver",
                           json={"to_version": 1})  # fmt: skip
    assert approver.status_code == 403


def test_an_agent_is_exported_as_signed_bytes_and_imported_again(served: Served) -> None:
    scripted = made(served, "waiter.yaml")
    run_until(served, scripted, {"waiting"})
    got = served.call("POST", f"/v1/agents/{scripted}/export", "acme", "operator", json={})
    # its spec reads a script from the host: over HTTP, an archive holds a network spec
    refused = served.call("POST", "/v1/agents/import", "acme", "operator", content=got.content)
    assert refused.status_code == 400 and "'model'" in refused.text, refused.text
    spec = {"name": "plain", "model": {"provider": "openai", "name": "m"}, "tools": ["read_file"]}
    agent_id = served.call("POST", "/v1/agents", "acme", "operator",
                           json={"spec": spec}).json()["agent_id"]  # fmt: skip
    got = served.call("POST", f"/v1/agents/{agent_id}/export", "acme", "operator", json={})
    assert got.status_code == 200 and got.headers["content-type"] == "application/octet-stream"
    archive, key = got.content, got.headers["x-stead-public-key"]
    assert hashlib.sha256(archive).hexdigest() == got.headers["x-stead-sha256"]
    # someone else's key: refused, nothing made
    other = "ed25519:" + "A" * 43 + "="
    refused = served.call("POST", f"/v1/agents/import?trust_key={other}", "acme", "operator",
                          content=archive)  # fmt: skip
    assert 400 <= refused.status_code < 500, refused.text
    assert len(served.call("GET", "/v1/agents", "acme", "viewer").json()) == 2
    grants = served.call("POST", "/v1/agents/import?with_grants=true", "acme", "operator",
                         content=archive)  # fmt: skip
    assert grants.status_code == 409 and "admin" in grants.text
    imported = served.call("POST", f"/v1/agents/import?trust_key={key}", "acme", "operator",
                           content=archive)  # fmt: skip
    assert imported.status_code == 201, imported.text
    body = imported.json()
    assert body["agent_id"] != agent_id and body["trusted"] is True and body["signed_by"] == key
    broken = served.call("POST", "/v1/agents/import", "acme", "operator",
                         content=archive[: len(archive) // 2])  # fmt: skip
    assert broken.status_code in (400, 422), broken.text
    assert len(served.call("GET", "/v1/agents", "acme", "viewer").json()) == 3


def test_model_goal_signoff_certificate_check_and_secret_names(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    got = served.call("PUT", f"/v1/agents/{agent_id}/model", "acme", "operator",
                      json={"model": "openai:gpt-test"})  # fmt: skip
    assert got.status_code == 200, got.text
    events = served.call("GET", f"/v1/agents/{agent_id}/events", "acme", "viewer").json()
    [changed] = [e for e in events["events"] if e["kind"] == "model_changed"]
    assert changed["data"]["model"] == "openai:gpt-test"
    assert changed["data"]["by"].startswith("operator@acme")
    for local in ("scripted:/etc/passwd", {"provider": "replay:x", "name": "y"}):
        refused = served.call("PUT", f"/v1/agents/{agent_id}/model", "acme", "operator",
                              json={"model": local})  # fmt: skip
        assert refused.status_code == 400, refused.text
    nogoal = served.call("POST", f"/v1/agents/{agent_id}/goals/g_none/signoff", "acme",
                         "approver", json={})  # fmt: skip
    assert nogoal.status_code == 400 and "no goal g_none" in nogoal.text

    write_spec(served.specs, "done", [{"finish": "done"}])
    finished = made(served, "done.yaml")
    run_until(served, finished, {"completed"})
    cert = served.call("GET", f"/v1/agents/{finished}/certificate", "acme", "viewer").json()
    ok = served.call("POST", "/v1/certificates/verify", "acme", "viewer",
                     json={"certificate": cert}).json()  # fmt: skip
    assert ok == {"ok": True, "problems": []}
    bumped = {**cert, "version": cert["version"] + 1}
    forged = served.call("POST", "/v1/certificates/verify", "acme", "viewer",
                         json={"certificate": bumped}).json()  # fmt: skip
    assert forged["ok"] is False and forged["problems"]
    elsewhere = served.call("POST", "/v1/certificates/verify", "globex", "viewer",
                            json={"certificate": cert}).json()  # fmt: skip
    assert elsewhere["ok"] is False

    for name in ("API_KEY", "OTHER"):
        served.call("PUT", f"/v1/secrets/{name}", "acme", "admin", json={"value": "v-" + name})
    listed = served.call("GET", "/v1/secrets", "acme", "admin").json()
    assert sorted(s["name"] for s in listed) == ["API_KEY", "OTHER"]
    assert "v-API_KEY" not in served.call("GET", "/v1/secrets", "acme", "admin").text
    assert served.call("GET", "/v1/secrets", "globex", "admin").json() == []
    assert served.call("GET", "/v1/secrets", "acme", "approver").status_code == 403
    assert served.call("DELETE", "/v1/secrets/OTHER", "acme", "admin").status_code == 204
    assert served.call("DELETE", "/v1/secrets/OTHER", "acme", "admin").status_code == 404
    own = served.call("DELETE", "/v1/secrets/stead.identity", "acme", "admin")
    assert own.status_code == 400, own.text  # stead's own: not a name a person may use
    assert [s["name"] for s in served.call("GET", "/v1/secrets", "acme", "admin").json()] == [
        "API_KEY"
    ]
