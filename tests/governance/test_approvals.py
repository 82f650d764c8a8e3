"""Approvals: bound to one call, single-use, time-limited, re-checked at execution.

Every test here restarts the worker between steps (a new Runtime on the same
SQLite file: nothing survives in memory) and drives time with a fake clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stead import FakeClock, Kind
from stead.governance.gate import judge
from stead.governance.policy import compile_policy

from .agents import RUNS, make_agent, requested, run, runtime_at

MINUTE = 60.0
ASK_DEPLOY = '@ask permit(principal, action, resource == Tool::"deploy");\n'
PERMIT_ALL = "permit(principal, action, resource);\n"


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def kinds(rt, agent_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.kind for e in rt.store.read_events(agent_id)]


def test_an_expired_approval_is_not_used_and_a_fresh_one_is_requested(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "prod"}}, {"finish": "done"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    assert run(rt, agent).state.status == "waiting"
    (first,) = requested(rt, agent)
    rt.approve(first["approval_id"], valid_for=15 * MINUTE)
    rt.close()  # the worker dies; nothing of it survives

    clock.advance(16 * MINUTE)
    rt = runtime_at(tmp_path, clock)
    state = run(rt, agent).state
    assert RUNS == []  # the tool did not run on a lapsed approval
    assert state.status == "waiting"
    (fresh,) = requested(rt, agent)
    assert fresh["approval_id"] != first["approval_id"]
    lapsed = [e for e in rt.store.read_events(agent) if e.kind == Kind.APPROVAL_LAPSED]
    assert [e.data["approval_id"] for e in lapsed] == [first["approval_id"]]
    assert "expired" in lapsed[0].data["reason"]

    rt.approve(fresh["approval_id"], valid_for=15 * MINUTE)
    clock.advance(14 * MINUTE)
    assert run(rt, agent).state.status == "completed"
    assert RUNS == [{"tool": "deploy", "target": "prod", "size": 1}]
    (intent,) = [e for e in rt.store.read_events(agent) if e.kind == Kind.TOOL_INTENT]
    assert intent.data["verdict"]["approval"] == fresh["approval_id"]
    assert rt.store.load_state(agent).approvals == {}  # used up
    rt.close()


def test_an_approval_is_used_once_and_never_for_a_second_call(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    same_call = {"tool": "deploy", "args": {"target": "prod"}}
    agent = make_agent(
        rt,
        tmp_path,
        [same_call, same_call, {"finish": "done"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    run(rt, agent)
    (first,) = requested(rt, agent)
    rt.approve(first["approval_id"])
    rt.close()

    rt = runtime_at(tmp_path, clock)
    state = run(rt, agent).state
    assert len(RUNS) == 1  # the first call ran; the identical second one asks again
    assert state.status == "waiting"
    (second,) = requested(rt, agent)
    assert second["approval_id"] != first["approval_id"]
    assert second["call_id"] != first["call_id"]
    assert second["args_hash"] == first["args_hash"]  # same arguments, still a new approval
    rt.close()


def test_changed_arguments_or_tool_do_not_match_an_approval(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "staging"}}, {"finish": "done"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    run(rt, agent)
    (asked,) = requested(rt, agent)
    rt.approve(asked["approval_id"])
    state = rt.store.load_state(agent)  # the approval, as stored
    call = asked["call_id"]

    def verdict(tool: str, args: dict[str, object]) -> object:
        return judge(
            state,
            call_id=call,
            tool=tool,
            effect="idempotent",
            args=args,
            now=clock.now(),
            policy=None,
        )

    as_approved = verdict("deploy", {"target": "staging"})
    assert as_approved.decision == "allow"  # type: ignore[attr-defined]
    changed = verdict("deploy", {"target": "prod"})
    assert changed.decision == "ask"  # type: ignore[attr-defined]
    assert "arguments" in dict(changed.lapsed)[asked["approval_id"]]  # type: ignore[attr-defined]
    extra = verdict("deploy", {"target": "staging", "size": 2})
    assert extra.decision == "ask"  # type: ignore[attr-defined]
    rt.close()


def test_a_policy_change_while_waiting_makes_the_runtime_ask_again(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    v1 = rt.set_policy("default", PERMIT_ALL + ASK_DEPLOY)
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "prod"}}, {"finish": "done"}],
        scope=[{"tool": "deploy"}],
    )
    run(rt, agent)
    (asked,) = requested(rt, agent)
    assert asked["policy_version"] == v1
    rt.approve(asked["approval_id"])
    v2 = rt.set_policy("default", PERMIT_ALL + ASK_DEPLOY + "// reviewed\n")
    assert v2 == v1 + 1
    rt.close()

    rt = runtime_at(tmp_path, clock)
    assert run(rt, agent).state.status == "waiting"
    assert RUNS == []
    (again,) = requested(rt, agent)
    assert again["policy_version"] == v2
    lapsed = [e for e in rt.store.read_events(agent) if e.kind == Kind.APPROVAL_LAPSED]
    assert "policy version" in lapsed[0].data["reason"]
    rt.approve(again["approval_id"])
    assert run(rt, agent).state.status == "completed"
    assert len(RUNS) == 1
    rt.close()


def test_a_denied_call_never_runs_and_the_model_sees_why(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "prod"}}, {"finish": "gave up"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    run(rt, agent)
    (asked,) = requested(rt, agent)
    rt.deny(asked["approval_id"], "not on a Friday")
    state = run(rt, agent).state
    assert state.status == "completed"
    assert RUNS == []
    (call,) = state.recent_calls
    assert not call["ok"] and "not on a Friday" in call["error"]
    assert "alice@test" in call["error"]
    rt.close()


def test_approvals_outlive_restarts_while_valid(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "prod"}}, {"finish": "done"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    run(rt, agent)
    (asked,) = requested(rt, agent)
    rt.approve(asked["approval_id"], valid_for=15 * MINUTE)
    rt.close()
    for _ in range(3):  # several restarts that do nothing
        runtime_at(tmp_path, clock).close()
        clock.advance(4 * MINUTE)
    rt = runtime_at(tmp_path, clock)
    assert run(rt, agent).state.status == "completed"
    assert len(RUNS) == 1
    rt.close()


def test_an_approval_needs_a_person_and_a_pending_request(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    from stead.errors import GovernanceError, NotFound

    with pytest.raises(NotFound, match="stead approvals"):
        rt.approve("apr_nope")
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": "prod"}}, {"finish": "done"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    run(rt, agent)
    (asked,) = requested(rt, agent)
    with pytest.raises(GovernanceError, match="reason"):
        rt.deny(asked["approval_id"], "  ")
    with pytest.raises(GovernanceError, match="positive"):
        rt.approve(asked["approval_id"], valid_for=0)
    rt.approve(asked["approval_id"])
    with pytest.raises(NotFound):
        rt.approve(asked["approval_id"])  # answered already
    rt.close()


def test_policy_verdict_and_version_are_journaled_with_each_call(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    version = rt.set_policy(
        "default",
        PERMIT_ALL + '@id("no-prod") forbid(principal, action, resource == Tool::"deploy") '
        'when { context.args.target == "prod" };\n',
    )
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"tool": "deploy", "args": {"target": "prod"}},
            {"tool": "deploy", "args": {"target": "dev"}},
            {"finish": "done"},
        ],
        scope=[{"tool": "deploy"}],
    )
    state = run(rt, agent).state
    assert RUNS == [{"tool": "deploy", "target": "dev", "size": 1}]
    refused, ran = state.recent_calls
    assert "no-prod" in refused["error"]
    events = list(rt.store.read_events(agent))
    (refusal,) = [e for e in events if e.kind == Kind.TOOL_RESULT and e.data.get("refused")]
    assert refusal.data["verdict"]["decision"] == "deny"
    assert refusal.data["verdict"]["policy_version"] == version
    (intent,) = [e for e in events if e.kind == Kind.TOOL_INTENT]
    assert intent.data["verdict"]["decision"] == "allow"
    assert intent.data["verdict"]["policy_version"] == version
    assert ran["ok"]
    rt.close()


def test_a_policy_is_parsed_before_it_is_stored(tmp_path: Path) -> None:
    from stead.errors import PolicyError

    rt = runtime_at(tmp_path, FakeClock())
    rt.set_policy("default", PERMIT_ALL)
    with pytest.raises(PolicyError, match="does not parse"):
        rt.set_policy("default", "permit(principal, action")
    record = rt.store.get_policy("default")
    assert record is not None and record.version == 1 and record.text == PERMIT_ALL
    compile_policy(record.text)
    rt.close()


def test_pending_approvals_show_the_calls_arguments_whole(tmp_path: Path) -> None:
    """A reviewer used to get only a hash of what they were asked to approve."""
    from stead.cli.main import main

    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    long_target = "prod-" + "x" * 2000
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "deploy", "args": {"target": long_target}}, {"finish": "done"}],
        autonomy="act_with_approval",
        scope=[{"tool": "deploy"}],
    )
    run(rt, agent)
    ((owner, pending),) = rt.pending_approvals()
    assert owner == agent and pending["args"] == {"target": long_target}
    rt.close()
    import contextlib
    import io
    import json

    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["approvals", "--json", *store]) == 0
    (listed,) = json.loads(printed.getvalue())
    assert listed["args"] == {"target": long_target}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["approvals", *store]) == 0
    assert long_target[:60] in printed.getvalue().replace("\n", "")
