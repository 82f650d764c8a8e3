"""Boundary: other tenants (docs/security.md).

Tenants share workers, the store and the blob store, so another tenant's
token, agent, spec or command is the attacker here. What must never happen:
one tenant reads, changes or learns of another's agents, journals, approvals,
secrets, blobs or workspace files, whatever route, id, page, message or view
it uses; an empty tenant acts as the operator; and what one agent leaves
behind (its workspace, ``/tmp``, ``/dev/shm``, its environment, its memory, a
secret) reaches the next agent a worker runs.

The context-bleed canary over HTTP: what one tenant's agent leaves anywhere
(its memory, its workspace, its messages, its secret, its journal) is never in
any answer to another tenant's token. ``stead selftest isolation`` passes on
this machine, and fails with evidence when isolation breaks. The store's own
separation, for every backend, is in tests/conformance/test_tenant_scope.py.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.cli.main import main
from stead.errors import NotFound, SteadError
from stead.integrity.keys import ensure_identity
from stead.messaging.delivery import deliver, make_envelope
from stead.sandbox.bwrap import BwrapSandbox
from stead.selftest import isolation_selftest
from stead.server import endpoints
from stead.store.sqlite import SqliteStore

from ..cli import test_bad_input as bad_input
from ..cli.test_bad_input import agent_ids, refused
from ..cli.test_cli import call, write_agent
from ..governance.agents import VAULT_KEY, make_agent, run, runtime_at
from ..server import conftest as server_fixtures
from ..server.conftest import Served, write_spec
from ..server.test_api import made, requests_for, run_until, waiting_approval
from ..server.test_web import logged_in

served = server_fixtures.served
"""A served store, two tenants, a token of every role (tests/server/conftest.py)."""
store = bad_input.store
"""A store with no agent yet (tests/cli/test_bad_input.py)."""


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


# -- over HTTP: the API and the page -----------------------------------------------------------


def test_another_tenant_s_agents_and_approvals_are_not_found(served: Served) -> None:
    agent_id, approval_id = waiting_approval(served, "acme")
    for e, path, body in requests_for(served, agent_id, approval_id):
        if "{" not in e.path or e.path == "/v1/secrets/{name}":
            continue  # nothing of a tenant's named in the path
        got = served.call(e.method, path, "globex", "admin", json=body)
        assert got.status_code == 404, (e.path, got.text)
        assert got.json()["error"]["code"] == "not_found", got.text
    assert served.call("GET", "/v1/agents", "globex", "viewer").json() == []
    assert served.call("GET", "/v1/approvals", "globex", "viewer").json() == []
    # a secret written for another tenant's agent is refused, and none is stored
    got = served.call("PUT", "/v1/secrets/API_KEY", "globex", "admin",
                      json={"value": "x", "agent_id": agent_id})  # fmt: skip
    assert got.status_code == 404
    assert served.runtime("acme").store.get_record(agent_id).tenant == "acme"


def test_an_approval_waits_in_the_inbox_of_its_own_tenant_only(served: Served) -> None:
    waiting_approval(served, "globex")
    assert served.call("GET", "/v1/approvals", "acme", "viewer").json() == []
    assert len(served.call("GET", "/v1/approvals", "globex", "viewer").json()) == 1


def test_another_tenant_s_agent_is_not_found_and_revoking_ends_the_session(
    served: Served,
) -> None:
    agent_id = made(served, "waiter.yaml")
    logged_in(served, tenant="globex", role="admin")
    assert served.client.get(f"/agents/{agent_id}").status_code == 404
    assert agent_id not in served.client.get("/").text
    [token] = [t for t in served.server.tokens.list_tokens("globex") if t.role == "admin"]
    served.server.tokens.revoke_token(token.token_id, served.server.clock.now())
    gone = served.client.get("/", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/login?next=/"


# -- messages and delegations to another tenant's agent ----------------------------------------


def _sent(rt: Runtime, agent: str) -> list[dict[str, Any]]:
    kinds = (Kind.MESSAGE_SENT, Kind.DELEGATED)
    return [dict(e.data) for e in rt.store.read_events(agent) if e.kind in kinds]


def _as_missing(text: str, agent: str) -> str:
    return text.replace(agent, "AGENT")


@pytest.mark.parametrize("tenant_view", [False, True])
def test_another_tenant_s_agent_is_answered_as_missing_and_nothing_is_written_to_it(
    tmp_path: Path, tenant_view: bool
) -> None:
    """A tenant-B agent messaging or delegating to tenant A's agent learns nothing.

    The answer is the one for an agent that does not exist (same exception,
    same words), and A's journal is not touched, whether the worker runs every
    tenant (the operator's) or only B's.
    """
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    victim = make_agent(rt, tmp_path, [{"finish": "x"}], name="victim", tenant="acme")
    before = list(rt.store.read_events(victim))
    ghost = "ag_0000000000000000000000nobody"
    script: list[Any] = []
    for to in (victim, ghost):
        script += [
            {"message": {"to": to, "text": "hello"}},
            {"delegate": {"to": to, "grant": "deploy", "max_uses": 1}},
        ]
    prober = make_agent(
        rt,
        tmp_path,
        [*script, {"finish": "probed"}],
        name="prober",
        tenant="globex",
        scope=[{"tool": "deploy", "max_uses": 5, "delegable": True}],
    )
    worker = rt
    if tenant_view:
        worker = Runtime(
            rt.store, tmp_path / "data", clock=clock, secret_key=VAULT_KEY, tenant="globex"
        )
    assert run(worker, prober).state.status == "completed"
    to_victim, delegated_victim, to_ghost, delegated_ghost = _sent(rt, prober)
    for real, missing in ((to_victim, to_ghost), (delegated_victim, delegated_ghost)):
        assert not real["ok"] and not missing["ok"]
        assert _as_missing(real["error"], victim) == _as_missing(missing["error"], ghost)
        assert real["error"].startswith(f"no agent with id {victim}")
    # the victim's journal is exactly what it was: no refusal, no lease, nothing
    assert list(rt.store.read_events(victim)) == before
    assert rt.store.load_state(victim).grants == rt.store.state_at(victim, len(before)).grants

    # and delivered directly, the envelope gets the missing agent's exception and text
    ensure_identity(rt, prober)
    sender = rt.store.load_state(prober)
    answers = []
    for to in (victim, ghost):
        for kind, body in (("message", {"text": "hi"}), ("delegation", {"grant": "x"})):
            env = make_envelope(rt, sender, to, kind, body)
            with pytest.raises(SteadError) as caught:
                deliver(rt, env)
            answers.append((type(caught.value), _as_missing(str(caught.value), to)))
    assert answers[:2] == answers[2:]
    assert answers[0][0] is NotFound
    # an envelope forged to claim tenant A's name, from B's real agent, is no different
    forged = make_envelope(rt, sender, victim, "message", {"text": "hi"})
    forged["tenant"] = "acme"
    with pytest.raises(NotFound) as caught:
        deliver(rt, forged)
    assert _as_missing(str(caught.value), victim) == answers[2][1]
    assert list(rt.store.read_events(victim)) == before
    rt.close()


# -- the command line --------------------------------------------------------------------------


def test_an_empty_tenant_is_not_the_operator(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_agent(tmp_path, [{"finish": "ok"}], tenant="acme")
    assert call("run", str(path), "--id", "ag_a", "--store", store) == 0
    capsys.readouterr()
    refused(capsys, "ls", "--store", store, "--tenant", "", needle="--tenant is empty")
    refused(capsys, "approve", "ap_x", "--store", store, "--tenant", "", needle="empty")
    monkeypatch.setenv("STEAD_TENANT", "")
    refused(capsys, "ls", "--store", store, needle="$STEAD_TENANT is empty")
    refused(capsys, "approvals", "--store", store, needle="empty")
    monkeypatch.delenv("STEAD_TENANT")
    assert agent_ids(store, capsys) == ["ag_a"]


# -- stead selftest isolation ------------------------------------------------------------------


class SharedTmpSandbox(BwrapSandbox):
    """A broken sandbox: every run shares one host folder as its /tmp."""

    def __init__(self, binary: str, shared: Path) -> None:
        super().__init__(binary)
        self.shared = shared

    def command(
        self,
        argv: Sequence[str],
        workspace: Path,
        env: Mapping[str, str],
        network: bool,
        **kw: Any,
    ) -> list[str]:
        args = super().command(argv, workspace, env, network, **kw)
        i = args.index("--tmpfs")
        assert args[i + 1] == "/tmp" and args[i - 2] == "--size"
        return [*args[: i - 2], "--bind", str(self.shared), "/tmp", *args[i + 2 :]]


def test_the_selftest_passes_on_this_machine(
    bwrap: BwrapSandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["selftest", "isolation", "--json", "--store", f"sqlite:///{tmp_path / 's.db'}"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["passed"] is True, [c for c in report["checks"] if not c["ok"]]
    assert len(report["checks"]) >= 10
    # the MCP server B's agent ran in its sandbox could not read the store or A's files
    mcp = [c for c in report["checks"] if c["check"].startswith("B's MCP server cannot read")]
    assert len(mcp) >= 3 and all(c["ok"] for c in mcp), mcp
    # and over HTTP: B's token finds nothing of A at the API or the page
    http = [c for c in report["checks"] if "API" in c["check"]]
    assert len(http) == 6 and all(c["ok"] for c in http), http


def test_a_shared_tmp_makes_it_fail_with_evidence(bwrap: BwrapSandbox, tmp_path: Path) -> None:
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    store = SqliteStore(tmp_path / "s.db")
    report = isolation_selftest(
        store, tmp_path / "data", sandbox=SharedTmpSandbox(bwrap.binary, shared)
    )
    store.close()
    assert not report.passed
    failed = {name: evidence for name, ok, evidence in report.checks if not ok}
    assert "no canary in B's sandbox (listing, reading, environment, processes)" in failed
    assert (
        "stead-canary-"
        in failed["no canary in B's sandbox (listing, reading, environment, processes)"]
    )
