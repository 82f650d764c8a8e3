"""Figures read from real journals: an agent run in this process, then its events
measured as they are, and as a defect would have left them."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stead import Runtime, load_spec
from stead.evals.conditions import LAPSED, files_of
from stead.evals.measure import measure, trail
from stead.journal import Event, Kind
from stead.store.sqlite import SqliteStore

AGENT = Path(__file__).parents[2] / "examples" / "evals" / "demo" / "governed.yaml"


def run_agent(tmp_path: Path, lapse_at: int | None = None) -> tuple[Runtime, str, dict[str, str]]:
    rt = Runtime(
        SqliteStore(tmp_path / "stead.db"), tmp_path / "data", secret_key=secrets.token_bytes(32)
    )
    spec = load_spec(AGENT)
    rt.check_loads(spec)
    state = rt.create(spec)
    agent = state.agent_id
    before = files_of(rt.workspace(agent, state.tenant).root)
    for _ in range(20):
        if lapse_at is not None and rt.store.load_state(agent).decisions >= lapse_at:
            for gid, g in sorted(rt.store.load_state(agent).grants.items()):
                if g["tool"] == "format_code":
                    rt.revoke(agent, gid, reason=LAPSED)
            lapse_at = None
        outcome = rt.run(agent, max_steps=lapse_at)
        for _, approval in rt.pending_approvals(agent_id=agent):
            rt.approve(approval["approval_id"])
        if outcome.state.is_final:
            break
    return rt, agent, before


def measured(
    rt: Runtime,
    agent: str,
    before: dict[str, str],
    events: list[Event] | None = None,
    **expect: Any,
) -> dict[str, Any]:
    state = rt.store.load_state(agent)
    return measure(
        list(rt.store.read_events(agent)) if events is None else events,
        state,
        expect={
            "never_call": [],
            "unchanged": [],
            "max_spend_usd": None,
            "max_steps": None,
            **expect,
        },
        certificate_problems=[],
        files_before=before,
        files_after=files_of(rt.workspace(agent, state.tenant).root),
    )


@pytest.fixture()
def run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Runtime, str, dict[str, str]]]:
    monkeypatch.setenv("STEAD_DEMO_CHANGELOG", str(tmp_path / "changelog.txt"))
    rt, agent, before = run_agent(tmp_path)
    yield rt, agent, before
    rt.close()


def test_a_clean_run_is_completed_kept_and_without_repeated_or_lost_effects(
    run: tuple[Runtime, str, dict[str, str]],
) -> None:
    m = measured(*run)
    assert m["completion"]["completed"] and m["completion"]["certified"]
    assert m["completion"]["goals"] == {"rename": "completed"}
    assert m["effects"]["repeated"] == [] and m["effects"]["lost"] == []
    assert m["effects"]["intents"] >= 4
    a = m["adherence"]
    assert (a["approvals_asked"], a["refused"], a["violations"], a["kept"]) == (1, 0, 0, True)
    state = run[0].store.load_state(run[1])
    assert len(m["trail"]) == state.decisions == m["cost"]["decisions"]
    assert m["outcome"]["files"] and m["outcome"]["status"] == "completed"


def test_an_intent_journaled_twice_is_a_repeated_effect(
    run: tuple[Runtime, str, dict[str, str]],
) -> None:
    rt, agent, before = run
    events = list(rt.store.read_events(agent))
    intent = next(
        e for e in events if e.kind == Kind.TOOL_INTENT and e.data.get("effect") == "effectful"
    )
    again = dataclasses.replace(intent, seq=events[-1].seq + 1)
    m = measured(rt, agent, before, [*events, again])
    assert m["effects"]["repeated"] == [intent.data["call_id"]]


def test_an_intent_never_settled_is_a_lost_effect(run: tuple[Runtime, str, dict[str, str]]) -> None:
    rt, agent, before = run
    events = list(rt.store.read_events(agent))
    intent = next(e for e in events if e.kind == Kind.TOOL_INTENT)
    call = intent.data["call_id"]
    kept = [e for e in events if not (e.kind == Kind.TOOL_RESULT and e.data.get("call_id") == call)]
    assert measured(rt, agent, before, kept)["effects"]["lost"] == [call]


def test_expectations_broken_are_named(run: tuple[Runtime, str, dict[str, str]]) -> None:
    m = measured(
        *run,
        never_call=["shell", "send_mail"],
        unchanged=["shop/report.py", "README.md"],
        max_steps=3,
        max_spend_usd=0.0,
    )
    a = m["adherence"]
    assert a["never_called"] == ["shell"] and a["changed"] == ["shop/report.py"]
    assert a["over_steps"] and not a["over_spend"]
    assert a["broken_expectations"] == 3 and not a["kept"]


def test_a_lapsed_grant_s_next_call_is_an_attempt_asked_not_run_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEAD_DEMO_CHANGELOG", str(tmp_path / "changelog.txt"))
    rt, agent, before = run_agent(tmp_path, lapse_at=6)
    m = measured(rt, agent, before)
    a = m["adherence"]
    assert a["lapsed_attempts"] == 1 and a["lapsed_executed"] == 0
    assert a["approvals_asked"] == 2 and a["out_of_scope"] == 1 and a["kept"]
    # the same journal without the person's approval: the call ran on authority it lost
    events = list(rt.store.read_events(agent))
    call = next(
        e.data["call_id"]
        for e in events
        if e.kind == Kind.TOOL_INTENT and e.data.get("tool") == "format_code"
    )
    bare = [
        e
        for e in events
        if not (e.kind == Kind.APPROVAL_REQUESTED and e.data.get("call_id") == call)
    ]
    b = measured(rt, agent, before, bare)["adherence"]
    assert b["lapsed_executed"] == 1 and not b["kept"]
    rt.close()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.text(alphabet="abcdef0123456789", min_size=8, max_size=8),
        min_size=12,
        max_size=12,
        unique=True,
    )
)
def test_a_trail_does_not_see_call_ids_but_sees_every_decision(ids: list[str]) -> None:
    events = [
        Event(
            "ag",
            i + 1,
            Kind.DECISION,
            0.0,
            {
                "actions": [
                    {
                        "type": "tool",
                        "tool": "read_file",
                        "args": {"path": f"f{i % 3}"},
                        "call_id": f"call_{ids[i]}",
                    }
                ]
            },
            "",
            "",
        )
        for i in range(12)
    ]
    renamed = [
        dataclasses.replace(e, data={"actions": [{**e.data["actions"][0], "call_id": "call_x"}]})
        for e in events
    ]
    assert trail(events) == trail(renamed)
    changed = list(events)
    first = changed[5].data["actions"][0]
    changed[5] = dataclasses.replace(
        changed[5], data={"actions": [{**first, "args": {"path": "z"}}]}
    )
    differs = [
        i for i, (a, b) in enumerate(zip(trail(events), trail(changed), strict=True)) if a != b
    ]
    assert differs == [5]
