"""Budgets of steps, tokens and wall time suspend the agent; custom Python rules block calls.

Each budget is crossed by an action that is not a tool call (a ``remember``, or a
new activation starting), so these tests say nothing about what happens to a
call in the same decision as the one that crosses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.errors import SpecError, ToolError
from stead.models.base import Decision
from stead.tools.base import Tool, as_tool, tool

from ..governance.agents import make_agent, runtime_at
from .test_monitors import CALLS, poll, violations

ASKED: list[tuple[str, str]] = []
"""What the custom rule below was asked about: ("event", kind) or ("call", tool)."""


@tool(effect="idempotent")
def deploy(target: str) -> str:
    """Deploy to a target (records each real run)."""
    CALLS.append({"tool": "deploy", "target": target})
    return f"deployed {target}"


TOOLS: dict[str, Tool] = {t.__name__: as_tool(t) for t in (poll, deploy)}


def no_prod_deploys(event: Any, call: Any) -> tuple[str, str] | None:
    """A custom monitor rule: agents never deploy to prod."""
    if call is None:
        ASKED.append(("event", event.kind))
        return None
    ASKED.append(("call", call.tool))
    if call.tool == "deploy" and call.args.get("target") == "prod":
        return ("block", "agents do not deploy to prod; ask the release manager")
    return None


def suspend_on_outage(event: Any, call: Any) -> tuple[str, str] | None:
    """A custom monitor rule on events: a result reporting an outage suspends the agent."""
    if event is not None and event.kind == Kind.TOOL_RESULT and "down" in str(event.data):
        return ("suspend", "an upstream service is down; a person should look")
    return None


RULES = "tests.integrity.test_budgets_and_custom_rules"


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()
    ASKED.clear()


def assert_check_agrees(rt: Runtime, agent: str) -> None:
    found, journaled = rt.check(agent)
    assert journaled, "the live run journaled no violation"
    assert [v.to_json() for _, v in found] == journaled


def assert_suspended_by_budget(rt: Runtime, agent: str, state: Any, what: str) -> dict[str, Any]:
    assert state.status == "needs_attention"
    assert state.status_reason.startswith(f"budget: the {what} budget of")
    (v,) = violations(rt, agent)
    assert (v["rule"], v["verdict"]) == ("budget", "suspend")
    assert what in v["message"]
    assert [x["rule"] for x in state.violations.values()] == ["budget"]  # open until cleared
    kinds = [e.kind for e in rt.store.read_events(agent)]
    assert Kind.FINISH_CLAIMED not in kinds
    assert_check_agrees(rt, agent)
    return v


# -- budgets ---------------------------------------------------------------------------


def test_a_steps_budget_suspends_on_the_first_step_beyond_it(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    script = [{"tool": "poll", "args": {"target": t}} for t in ("a", "b", "c")]
    agent = make_agent(
        rt,
        tmp_path,
        [*script, {"remember": {"phase": "four"}}, {"finish": "done"}],
        scope=[{"tool": "*"}],
        monitors={"budget": {"steps": 3}},
    )
    state = rt.run(agent, tools=TOOLS).state
    v = assert_suspended_by_budget(rt, agent, state, "steps")
    assert "(4)" in v["message"]
    decision_4 = next(
        e.seq
        for e in rt.store.read_events(agent)
        if e.kind == Kind.DECISION and e.data["step"] == 4
    )
    assert v["events"] == [decision_4]
    assert [c["target"] for c in CALLS] == ["a", "b", "c"]  # three steps within the budget
    assert rt.run(agent, tools=TOOLS).state.status == "needs_attention"  # it stays stopped
    assert state.decisions == 4
    rt.close()


class Costly:
    """A model that reports 400 tokens a decision: polls twice, then remembers, then finishes."""

    name = "costly"

    def decide(self, context: Any) -> Decision:
        step = context.step  # decisions made so far
        if step < 2:
            action: dict[str, Any] = {"type": "tool", "tool": "poll", "args": {"target": str(step)}}
        elif step == 2:
            action = {"type": "remember", "values": {"spent": "a lot"}}
        else:
            action = {"type": "finish", "summary": "done"}
        return Decision((action,), usage={"tokens": 400})


def test_a_tokens_budget_suspends_when_the_reported_tokens_exceed_it(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt, tmp_path, [{"finish": "x"}], scope=[{"tool": "*"}],
        monitors={"budget": {"tokens": 1000}},
    )  # fmt: skip
    state = rt.run(agent, tools=TOOLS, model=Costly()).state
    v = assert_suspended_by_budget(rt, agent, state, "tokens")
    assert "(1200)" in v["message"]  # 800 after two decisions was within it
    assert state.usage["tokens"] == pytest.approx(1200)
    assert state.decisions == 3
    assert len(CALLS) == 2
    decisions = [e for e in rt.store.read_events(agent) if e.kind == Kind.DECISION]
    assert [d.data["usage"]["total_tokens"] for d in decisions] == [400, 800, 1200]
    assert v["events"] == [decisions[2].seq]
    rt.close()


def test_a_wall_seconds_budget_suspends_an_agent_resumed_after_it(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"tool": "poll", "args": {"target": "a"}},
            {"tool": "poll", "args": {"target": "b"}},
            {"remember": {"phase": "late"}},
            {"finish": "done"},
        ],
        scope=[{"tool": "*"}],
        monitors={"budget": {"wall_seconds": 3600}},
    )
    clock.advance(3000)
    assert rt.run(agent, tools=TOOLS, max_steps=2).state.status == "running"
    assert violations(rt, agent) == []  # 3000 s since creation: within the budget
    rt.close()
    clock.advance(601)  # the next worker picks it up 3601 s after its creation
    rt = runtime_at(tmp_path, clock)
    state = rt.run(agent, tools=TOOLS).state
    v = assert_suspended_by_budget(rt, agent, state, "wall_seconds")
    assert "(3601)" in v["message"]
    assert state.decisions == 2  # stopped before it decided anything more
    assert len(CALLS) == 2
    rt.close()


def test_a_wall_seconds_budget_spent_during_a_run_suspends_it(tmp_path: Path) -> None:
    clock = FakeClock()

    @tool(name="poll", effect="idempotent")
    def slow_poll(target: str) -> str:
        CALLS.append({"tool": "poll", "target": target})
        clock.advance(40)
        return f"{target} is fine"

    rt = runtime_at(tmp_path, clock)
    script = [{"tool": "poll", "args": {"target": str(n)}} for n in range(5)]
    agent = make_agent(
        rt,
        tmp_path,
        [*script, {"finish": "done"}],
        scope=[{"tool": "*"}],
        monitors={"budget": {"wall_seconds": 100}},
    )
    state = rt.run(agent, tools={**TOOLS, "poll": as_tool(slow_poll)}).state
    v = assert_suspended_by_budget(rt, agent, state, "wall_seconds")
    assert "(120)" in v["message"]  # the third call's result came 120 s after creation
    third = [e for e in rt.store.read_events(agent) if e.kind == Kind.TOOL_RESULT][2]
    assert v["events"] == [third.seq]
    assert len(CALLS) == 3
    rt.close()


# -- custom python rules -----------------------------------------------------------------


def test_a_custom_python_rule_blocks_the_call_it_names(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"tool": "deploy", "args": {"target": "qa"}},
            {"tool": "deploy", "args": {"target": "prod"}},
            {"tool": "poll", "args": {"target": "prod"}},
            {"finish": "done"},
        ],
        scope=[{"tool": "*"}],
        monitors={"custom": [{"python": f"{RULES}:no_prod_deploys"}]},
    )
    state = rt.run(agent, tools=TOOLS).state
    assert CALLS == [
        {"tool": "deploy", "target": "qa"},
        {"tool": "poll", "target": "prod"},
    ]  # the prod deploy never ran; the agent went on
    assert state.status == "completed"  # a block stops one call, not the agent
    (v,) = violations(rt, agent)
    assert v["rule"] == f"python {RULES}:no_prod_deploys"
    assert v["verdict"] == "block" and "release manager" in v["message"]
    events = list(rt.store.read_events(agent))
    (blocked,) = [e for e in events if e.kind == Kind.TOOL_RESULT and e.data.get("blocked")]
    assert blocked.data["args"] == {"target": "prod"} and blocked.data["ok"] is False
    assert v["call_id"] == blocked.data["call_id"]
    assert not any(
        e.kind == Kind.TOOL_INTENT and e.data["call_id"] == blocked.data["call_id"] for e in events
    )  # nothing was attempted
    shown = next(c for c in state.recent_calls if c["call_id"] == blocked.data["call_id"])
    assert "release manager" in shown["error"]  # the model is told why
    # the rule was asked about every call before it ran, and fed the journal's events
    assert [name for what, name in ASKED if what == "call"] == ["deploy", "deploy", "poll"]
    assert ("event", Kind.TOOL_RESULT) in ASKED
    assert_check_agrees(rt, agent)
    rt.close()


def test_a_custom_python_rule_on_events_suspends(tmp_path: Path) -> None:
    @tool(name="poll", effect="idempotent")
    def status(target: str) -> str:
        CALLS.append({"tool": "poll", "target": target})
        return f"{target} is {'down' if target == 'db' else 'fine'}"

    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"tool": "poll", "args": {"target": "web"}},
            {"tool": "poll", "args": {"target": "db"}},
            {"tool": "poll", "args": {"target": "cache"}},
            {"finish": "done"},
        ],
        scope=[{"tool": "*"}],
        monitors={"custom": [{"python": f"{RULES}:suspend_on_outage"}]},
    )
    state = rt.run(agent, tools={**TOOLS, "poll": as_tool(status)}).state
    assert state.status == "needs_attention"
    message = "an upstream service is down; a person should look"
    assert state.status_reason == f"python {RULES}:suspend_on_outage: {message}"
    (v,) = violations(rt, agent)
    down = next(
        e.seq
        for e in rt.store.read_events(agent)
        if e.kind == Kind.TOOL_RESULT and e.data["args"] == {"target": "db"}
    )
    assert (v["verdict"], v["events"]) == ("suspend", [down])
    assert [c["target"] for c in CALLS] == ["web", "db"]
    assert_check_agrees(rt, agent)
    rt.close()


def test_a_custom_python_rule_that_cannot_be_found_stops_the_run_naming_it(
    tmp_path: Path,
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [{"tool": "poll", "args": {"target": "a"}}, {"finish": "done"}],
        scope=[{"tool": "*"}],
        monitors={"custom": [{"python": f"{RULES}:no_such_rule"}]},
    )
    with pytest.raises(ToolError, match=f"module '{RULES}' has no 'no_such_rule'"):
        rt.run(agent, tools=TOOLS)
    assert CALLS == []  # no call ran unwatched
    assert rt.store.load_state(agent).decisions == 0
    rt.close()


@pytest.mark.parametrize("ref", [3, "nocolon"])
def test_a_custom_python_rule_that_is_not_module_colon_function_is_refused_at_creation(
    tmp_path: Path, ref: Any
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    try:
        with pytest.raises(SpecError, match=r"monitors\.custom\[0\]\.python"):
            make_agent(rt, tmp_path, [{"finish": "x"}], monitors={"custom": [{"python": ref}]})
    finally:
        rt.close()
