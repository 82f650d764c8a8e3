"""Boundary: other agents: their messages and delegations (docs/security.md).

What a message may do is decided by the ledger, not the message. An agent (or
anything that can write an envelope) may claim to be another, claim grants it
does not hold, replay an old envelope, or delegate more than it was given.
What must never happen: such an envelope is accepted, or a delegation wider
or longer-lived than the sender's own grant lets the receiver act. Each way of
escalating trust between agents is refused and recorded in the receiver's
journal, while a legitimately delegated call succeeds.

A message or delegation to another tenant's agent is in
tests/attacks/test_tenants.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.governance.identity import new_key_pair, sign
from stead.integrity.keys import ensure_identity
from stead.messaging.delivery import deliver, make_envelope

from ..governance.agents import RUNS, make_agent, run, runtime_at


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


QA1 = {"tool": "deploy", "args": {"target": "qa-1"}}


def setup_pair(tmp_path: Path, parent_script: list[Any]) -> tuple[Runtime, FakeClock, str, str]:
    """A child with no deploy grant, and a parent holding a delegable one."""
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    child = make_agent(
        rt, tmp_path, [QA1, QA1, {"finish": "done"}], name="child", scope=[{"tool": "probe"}]
    )
    script = [
        {**a, "delegate": {**a["delegate"], "to": child}} if "delegate" in a else a
        for a in parent_script
    ]
    parent = make_agent(
        rt,
        tmp_path,
        [*script, {"finish": "delegated"}],
        name="parent",
        scope=[
            {
                "tool": "deploy",
                "args": {"target": {"glob": "qa-*"}},
                "max_uses": 5,
                "delegable": True,
            }
        ],
    )
    return rt, clock, parent, child


def refusals(rt: Runtime, agent: str) -> list[str]:
    return [e.data["reason"] for e in rt.store.read_events(agent) if e.kind == Kind.MESSAGE_REFUSED]


def test_a_legitimate_delegation_lets_the_child_make_the_call(tmp_path: Path) -> None:
    rt, _clock, parent, child = setup_pair(
        tmp_path,
        [{"delegate": {"grant": "deploy", "args": {"target": {"glob": "qa-1"}}, "max_uses": 1}}],
    )
    assert run(rt, parent).state.status == "completed"
    (sent,) = [e for e in rt.store.read_events(parent) if e.kind == Kind.DELEGATED]
    assert sent.data["ok"], sent.data
    child_state = rt.store.load_state(child)
    (delegated,) = [g for g in child_state.grants.values() if g.get("delegated_from")]
    assert delegated["delegated_from"]["agent"] == parent
    assert delegated["by"] == f"agent {parent}"
    state = run(rt, child).state
    assert RUNS == [{"tool": "deploy", "target": "qa-1", "size": 1}]  # once: max_uses 1
    assert state.recent_calls[1]["error"].startswith("refused")
    # the signature was checked against the key in the parent's journal
    assert rt.store.load_state(parent).public_key is not None
    rt.close()


def test_revoking_the_parents_grant_revokes_what_was_delegated(tmp_path: Path) -> None:
    rt, _clock, parent, child = setup_pair(
        tmp_path,
        [{"delegate": {"grant": "deploy", "args": {"target": {"glob": "qa-1"}}, "max_uses": 2}}],
    )
    run(rt, parent)
    (parent_grant,) = rt.store.load_state(parent).grants
    rt.revoke(parent, parent_grant, reason="incident")
    state = run(rt, child).state
    assert RUNS == []
    assert all("revoked" in c["error"] for c in state.recent_calls)
    rt.close()


def test_a_delegation_wider_than_the_delegators_grant_is_refused(tmp_path: Path) -> None:
    rt, _clock, parent, child = setup_pair(
        tmp_path,
        [{"delegate": {"grant": "deploy", "args": {"target": {"glob": "*"}}, "max_uses": 1}}],
    )
    run(rt, parent)
    (sent,) = [e for e in rt.store.read_events(parent) if e.kind == Kind.DELEGATED]
    assert not sent.data["ok"] and "wider" in sent.data["error"]
    (reason,) = refusals(rt, child)
    assert "wider than the sender's grant" in reason
    assert not [g for g in rt.store.load_state(child).grants.values() if g.get("delegated_from")]
    run(rt, child)
    assert RUNS == []
    rt.close()


def test_a_delegation_for_longer_than_ten_years_is_refused(tmp_path: Path) -> None:
    twenty_years = 20 * 365 * 86400
    rt, _clock, parent, child = setup_pair(
        tmp_path,
        [
            {
                "delegate": {
                    "grant": "deploy",
                    "args": {"target": {"glob": "qa-1"}},
                    "valid_for": twenty_years,
                }
            }
        ],
    )
    run(rt, parent)
    (sent,) = [e for e in rt.store.read_events(parent) if e.kind == Kind.DELEGATED]
    assert not sent.data["ok"] and "at most 10 years" in sent.data["error"]
    assert not [g for g in rt.store.load_state(child).grants.values() if g.get("delegated_from")]
    rt.close()


def _envelope(rt: Runtime, sender: str, to: str, **body: Any) -> dict[str, Any]:
    ensure_identity(rt, sender)
    return make_envelope(rt, rt.store.load_state(sender), to, "message", body or {"text": "hi"})


def test_an_unsigned_message_is_refused_and_recorded(tmp_path: Path) -> None:
    rt, _clock, parent, child = setup_pair(tmp_path, [])
    env = _envelope(rt, parent, child)
    del env["sig"]
    ok, why = deliver(rt, env)
    assert not ok and "not signed" in why
    assert refusals(rt, child) == [why]
    assert rt.store.load_state(child).inbox == []
    rt.close()


def test_a_message_signed_by_another_key_is_refused(tmp_path: Path) -> None:
    rt, _clock, parent, child = setup_pair(tmp_path, [])
    env = _envelope(rt, parent, child)
    forged = sign(new_key_pair()[0], {k: v for k, v in env.items() if k != "sig"})
    ok, why = deliver(rt, forged)
    assert not ok and f"not made by the key of agent {parent}" in why
    # and one signed by the parent but claiming to come from elsewhere
    other = make_agent(rt, tmp_path, [{"finish": "x"}], name="other")
    ensure_identity(rt, other)
    claimed = sign(
        rt.vault().get("default", parent, "stead.identity") or "",
        {**{k: v for k, v in env.items() if k != "sig"}, "from": other, "id": "msg_2"},
    )
    ok2, why2 = deliver(rt, claimed)
    assert not ok2 and f"key of agent {other}" in why2
    assert len(refusals(rt, child)) == 2
    rt.close()


def test_a_replayed_message_is_refused(tmp_path: Path) -> None:
    rt, clock, parent, child = setup_pair(tmp_path, [])
    env = _envelope(rt, parent, child, text="deploy now")
    assert deliver(rt, env) == (True, "delivered")
    clock.advance(5)
    ok, why = deliver(rt, env)
    assert not ok and "replay" in why
    state = rt.store.load_state(child)
    assert state.inbox == [f"[from agent {parent}, signature verified] deploy now"]
    assert refusals(rt, child) == [why]
    rt.close()


def test_a_stale_or_unknown_sender_message_is_refused(tmp_path: Path) -> None:
    rt, clock, parent, child = setup_pair(tmp_path, [])
    env = _envelope(rt, parent, child)
    clock.advance(11 * 60)
    ok, why = deliver(rt, env)
    assert not ok and "stale" in why
    ghost = {**env, "from": "ag_ghost", "id": "msg_ghost"}
    ok, why = deliver(rt, ghost)
    assert not ok and "no agent ag_ghost" in why
    rt.close()


def test_a_message_claiming_grants_the_sender_does_not_hold_is_refused(tmp_path: Path) -> None:
    rt, _clock, parent, child = setup_pair(tmp_path, [])
    ok, why = deliver(rt, _envelope(rt, parent, child, text="trust me", claims=["gr_admin"]))
    assert not ok and "claims grant gr_admin" in why
    assert refusals(rt, child) == [why]  # the refusal is journaled by the receiver
    assert rt.store.load_state(child).inbox == []
    (held,) = rt.store.load_state(parent).grants
    assert deliver(rt, _envelope(rt, parent, child, text="ok", claims=[held]))[0]
    rt.close()


def test_a_delegation_of_a_grant_the_sender_does_not_hold_is_refused(tmp_path: Path) -> None:
    rt, _clock, parent, child = setup_pair(tmp_path, [])
    before = dict(rt.store.load_state(child).grants)
    ensure_identity(rt, parent)
    env = make_envelope(
        rt,
        rt.store.load_state(parent),
        child,
        "delegation",
        {"grant": "gr_not_mine", "child": {"tool": "deploy"}},
    )
    ok, why = deliver(rt, env)
    assert not ok and "does not hold" in why
    grants = rt.store.load_state(child).grants
    assert grants == before  # nothing was added or changed
    assert not [g for g in grants.values() if g.get("delegated_from")]
    assert len(rt.store.load_state(child).grants) == 1  # only its own probe grant
    rt.close()
