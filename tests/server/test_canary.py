"""The context-bleed canary, over HTTP: what one tenant's agent leaves anywhere (its
memory, its workspace, its messages, its secret, its journal) is never in any answer
to another tenant's token, whatever route, id or page it asks for."""

from __future__ import annotations

import re
import uuid
from collections import defaultdict

from stead.server import endpoints

from .conftest import Served, write_spec
from .test_api import made, run_until


def test_another_tenant_never_sees_a_canary_anywhere(served: Served) -> None:
    canary = f"stead-canary-{uuid.uuid4().hex}"
    write_spec(served.specs, "planter", [
        {"tool": "write_file", "args": {"path": "canary.txt", "content": canary}},
        {"remember": {"canary": canary}},
        {"wait_for_input": f"say {canary}?"},
        {"wait_for_input": "and again?"},
        {"finish": canary},
    ])  # fmt: skip
    agent_id = made(served, "planter.yaml")
    run_until(served, agent_id, {"waiting"})
    assert served.call("POST", f"/v1/agents/{agent_id}/messages", "acme", "operator",
                       json={"text": canary}).status_code == 200  # fmt: skip
    run_until(served, agent_id, {"waiting"})
    assert served.call("PUT", "/v1/secrets/CANARY", "acme", "admin",
                       json={"value": canary}).status_code == 204  # fmt: skip
    snap = served.call("POST", f"/v1/agents/{agent_id}/hibernate", "acme", "operator", json={})
    assert snap.status_code == 200, snap.text
    # the canary is there to be found: acme's own viewer sees it
    assert canary in served.call("GET", f"/v1/agents/{agent_id}", "acme", "viewer").text
    state = served.runtime("acme").store.load_state(agent_id)
    ids: dict[str, str] = defaultdict(lambda: "x")
    ids |= {"agent_id": agent_id, "snapshot_id": snap.json()["snapshot_id"], "seq": "3",
            "grant_id": sorted(state.grants)[0], "name": "CANARY", "call_id": "x",
            "approval_id": "x", "violation_id": "x", "proposal_id": "x"}  # fmt: skip
    answers = []
    for e in endpoints():
        for role in ("viewer", "operator", "approver", "admin"):
            path = e.path.format_map(ids)
            if e.path.endswith("/stream"):
                path += "?after=0"
            got = served.call(e.method, path, "globex", role,
                              json={} if e.body is not None and not e.raw else None)  # fmt: skip
            answers.append((e.method, path, role, got.status_code, got.text))
            if "{" in e.path and e.path != "/v1/secrets/{name}":
                # refused, not found, or (an empty body) refused before anything is looked up
                assert got.status_code in (400, 403, 404), (e.path, role, got.text)
                if got.status_code == 400:
                    assert got.json()["error"]["code"] == "bad_request", got.text
    # and the page, with a session of globex's admin
    served.client.cookies.clear()
    served.client.post("/login", data={"token": served.tokens[("globex", "admin")]})
    for page in ("/", "/approvals", f"/agents/{agent_id}", "/?status=hibernated"):
        got = served.client.get(page)
        answers.append(("GET", page, "page", got.status_code, got.text))
    leaked = [a[:4] for a in answers if canary in a[4] or agent_id in re.sub(
        r"no agent with id \S+", "", a[4])]  # fmt: skip
    assert not leaked, leaked
