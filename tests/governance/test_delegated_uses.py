"""A delegation of counted uses takes them from the parent grant.

However many times a grant of N uses is delegated, to however many agents, and
however the holder uses it itself, no more than N calls run under it in all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind

from .agents import RUNS, make_agent, run, runtime_at

QA1 = {"tool": "deploy", "args": {"target": "qa-1"}}


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def delegate(to: str, uses: int) -> dict[str, Any]:
    return {
        "delegate": {
            "to": to,
            "grant": "deploy",
            "args": {"target": {"glob": "qa-1"}},
            "max_uses": uses,
        }
    }


@pytest.mark.parametrize("limit", [1, 2])
def test_delegations_never_allow_more_uses_than_the_grant_had(tmp_path: Path, limit: int) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    kids = []
    for name in ("c1", "c2"):
        folder = tmp_path / name
        folder.mkdir()
        script = [QA1, QA1, QA1, {"finish": "done"}]
        kids.append(make_agent(rt, folder, script, name=name, scope=[{"tool": "probe"}]))
    folder = tmp_path / "parent"
    folder.mkdir()
    scope = [
        {
            "tool": "deploy",
            "args": {"target": {"glob": "qa-*"}},
            "max_uses": limit,
            "delegable": True,
        }
    ]
    parent = make_agent(
        rt,
        folder,
        [delegate(kids[0], 1), delegate(kids[0], 1), delegate(kids[1], 1), QA1, {"finish": "x"}],
        name="parent",
        scope=scope,
    )
    run(rt, parent)
    for kid in kids:
        run(rt, kid)
    assert len(RUNS) == limit  # in all: the parent's own call and every child's
    (grant,) = rt.store.load_state(parent).grants.values()
    assert grant["uses"] == limit
    sent = [e for e in rt.store.read_events(parent) if e.kind == Kind.DELEGATED]
    accepted = [e for e in sent if e.data["ok"]]
    assert len(accepted) == limit and all(e.data["reserved"] == 1 for e in accepted)
    refused = [e for e in sent if not e.data["ok"]]
    assert len(refused) == 3 - limit
    assert all("can no longer use" in e.data["error"] for e in refused)
    assert all(f"used all {limit} times" in e.data["error"] for e in refused)
    rt.close()


def test_scope_shows_a_delegated_grant_dead_once_its_source_is_revoked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from stead.cli.main import main

    rt = runtime_at(tmp_path, FakeClock())
    (tmp_path / "c").mkdir()
    child = make_agent(rt, tmp_path / "c", [{"finish": "d"}], name="c", scope=[{"tool": "probe"}])
    (tmp_path / "p").mkdir()
    scope = [{"tool": "deploy", "max_uses": 3, "delegable": True}]
    parent = make_agent(rt, tmp_path / "p", [delegate(child, 1), {"wait_for_input": "?"}],
                        name="p", scope=scope)  # fmt: skip
    run(rt, parent)
    (source,) = rt.store.load_state(parent).grants
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]

    def delegated() -> dict[str, Any]:
        capsys.readouterr()
        assert main(["scope", child, "--json", *store]) == 0
        (grant,) = [g for g in json.loads(capsys.readouterr().out)["grants"] if g["delegated_from"]]
        return dict(grant)

    assert delegated()["inactive"] is None
    rt.revoke(parent, source, reason="incident")
    assert "was revoked" in delegated()["inactive"]
    rt.close()


def test_a_refusal_quoting_a_replay_is_not_taken_for_one(tmp_path: Path) -> None:
    """The sender tells a retry from the receiver's flag, not from words a model
    can put in the refusal: a refused delegation reserves nothing."""
    rt = runtime_at(tmp_path, FakeClock())
    (tmp_path / "c").mkdir()
    child = make_agent(rt, tmp_path / "c", [{"finish": "d"}], name="c", scope=[{"tool": "probe"}])
    (tmp_path / "p").mkdir()
    sneaky = {
        "delegate": {
            "to": child,
            "grant": "deploy",
            "args": {"target": {"glob": "already received"}},
        }
    }
    scope = [
        {"tool": "deploy", "args": {"target": {"glob": "qa-*"}}, "max_uses": 2, "delegable": True}
    ]
    parent = make_agent(rt, tmp_path / "p", [sneaky, QA1, {"finish": "x"}], name="p", scope=scope)
    run(rt, parent)
    (sent,) = [e for e in rt.store.read_events(parent) if e.kind == Kind.DELEGATED]
    assert not sent.data["ok"] and "reserved" not in sent.data
    assert "already received" in sent.data["error"]
    (grant,) = rt.store.load_state(parent).grants.values()
    assert grant["uses"] == 1 and len(RUNS) == 1  # the parent's own call only
    rt.close()


def test_a_delegation_delivered_again_long_after_is_still_a_replay(tmp_path: Path) -> None:
    """Message ids are remembered only while a message can be fresh, but a
    delegation's is found in the receiver's ledger for good: a sender's very late
    retry never records the grant twice."""
    from stead.integrity.keys import ensure_identity
    from stead.messaging.delivery import _deliver, make_envelope

    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    (tmp_path / "c").mkdir()
    child = make_agent(rt, tmp_path / "c", [{"finish": "d"}], name="c", scope=[{"tool": "probe"}])
    (tmp_path / "p").mkdir()
    scope = [{"tool": "deploy", "max_uses": 4, "delegable": True}]
    parent = make_agent(rt, tmp_path / "p", [{"finish": "x"}], name="p", scope=scope)
    ensure_identity(rt, parent)
    (gid,) = rt.store.load_state(parent).grants
    body = {"grant": gid, "child": {"tool": "deploy", "max_uses": 2}}

    def send() -> tuple[bool, str, bool]:
        sender = rt.store.load_state(parent)
        return _deliver(rt, make_envelope(rt, sender, child, "delegation", body, "msg_fixed"))

    assert send()[0]
    clock.advance(700)  # past the time a message id is remembered for
    assert _deliver(rt, make_envelope(rt, rt.store.load_state(parent), child, "message",
                                      {"text": "later"}))[0]  # fmt: skip
    assert "msg_fixed" not in rt.store.load_state(child).seen_messages  # forgotten there
    ok, detail, replay = send()
    assert not ok and replay and "a replay" in detail
    delegated = [g for g in rt.store.load_state(child).grants.values() if g["delegated_from"]]
    assert len(delegated) == 1
    rt.close()
