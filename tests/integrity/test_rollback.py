"""Rollback: compensate in reverse order, restore the workspace, keep the journal whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime, verify_chain
from stead.errors import UsageError
from stead.tools.base import as_tool, tool

from ..governance.agents import make_agent, runtime_at

TOKEN = "TOKEN-abc123xyz-42"
UNDONE: list[int] = []


@tool(effect="idempotent")
def mint() -> str:
    """Make a token."""
    return TOKEN


@tool(effect="idempotent")
def note(path: str, text: str, ctx: Any) -> str:
    """Write a note into the workspace (independent work)."""
    (ctx.workspace / path).write_text(text)
    return "noted"


def _undo(args: dict[str, Any], result: Any, ctx: Any) -> str:
    UNDONE.append(args["step"])
    return f"undid {args['step']}"


@tool(effect="effectful", compensate=_undo)
def use(token: str, step: int, ctx: Any) -> str:
    """Spend a token; leaves a receipt in the workspace."""
    (ctx.workspace / f"receipt-{step}.txt").write_text(f"spent at step {step}\n")
    return f"done {step}"


@tool(effect="effectful")
def announce(text: str) -> str:
    """Tell the world (cannot be taken back)."""
    return "announced"


TOOLS = {t.__name__: as_tool(t) for t in (mint, note, use, announce)}
SCRIPT: list[Any] = [
    {"tool": "note", "args": {"path": "a.txt", "text": "first"}},
    {"remember": {"phase": "before"}},
    {"tool": "mint"},  # step 3
    {"tool": "note", "args": {"path": "b.txt", "text": "independent"}},  # step 4
    {"tool": "use", "args": {"token": TOKEN, "step": 5}},
    {"tool": "announce", "args": {"text": "we are live"}},
    {"remember": {"phase": "after"}},
    {"tool": "use", "args": {"token": TOKEN, "step": 8}},
    {"finish": "done"},
]


@pytest.fixture(autouse=True)
def _clear() -> None:
    UNDONE.clear()


def ran(tmp_path: Path) -> tuple[Runtime, str, dict[int, int]]:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(rt, tmp_path, SCRIPT, scope=[{"tool": "*"}])
    assert rt.run(agent, tools=TOOLS).state.status == "completed"
    ends, results = {}, {}
    step = 0
    for e in rt.store.read_events(agent):
        if e.kind == Kind.DECISION:
            step = e.data["step"]
        elif e.kind == Kind.STEP_COMPLETED:
            ends[step] = e.seq
        elif e.kind == Kind.TOOL_RESULT:
            results[step] = e.seq
    return rt, agent, {"end2": ends[2], "result3": results[3]}


def test_rollback_to_before_step_3_undoes_8_then_5(tmp_path: Path) -> None:
    rt, agent, marks = ran(tmp_path)
    ws = rt.workspace(agent, "default").root
    before = [e.hash for e in rt.store.read_events(agent)]
    report = rt.rollback(agent, to_version=marks["end2"], tools=TOOLS)
    assert UNDONE == [8, 5]  # newest first
    assert len(report.compensated) == 2
    assert len(report.needs_person) == 1  # announce has no compensate hook
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt"]  # receipts and b.txt gone
    state = rt.store.load_state(agent)
    assert state.memory == {"phase": "before"} and state.status == "running"
    assert state.manifest == rt.store.state_at(agent, marks["end2"]).manifest
    events = list(rt.store.read_events(agent))
    assert [e.hash for e in events[: len(before)]] == before  # nothing was deleted
    assert verify_chain(events).ok
    kinds = [e.kind for e in events[len(before) :]]
    assert kinds.count(Kind.COMPENSATED) == 2 and Kind.COMPENSATION_NEEDED in kinds
    assert kinds[-1] == Kind.ROLLED_BACK
    rt.close()


def test_rolling_back_a_bad_result_keeps_independent_work(tmp_path: Path) -> None:
    rt, agent, marks = ran(tmp_path)
    ws = rt.workspace(agent, "default").root
    rt.quarantine(agent, marks["result3"], "the token was forged")
    report = rt.rollback(agent, downstream_of=marks["result3"], tools=TOOLS)
    assert UNDONE == [8, 5]
    assert report.needs_person == []  # announce did not depend on the token
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt", "b.txt"]  # step 4 kept
    state = rt.store.load_state(agent)
    assert state.memory == {"phase": "after"}  # the agent's own state is kept
    assert state.violations == {}  # the quarantine is closed by the rollback
    assert verify_chain(rt.store.read_events(agent)).ok
    rt.close()


def test_a_rollback_is_not_repeated_and_refuses_a_mid_step_version(tmp_path: Path) -> None:
    rt, agent, marks = ran(tmp_path)
    rt.rollback(agent, to_version=marks["end2"], tools=TOOLS)
    rt.rollback(agent, to_version=marks["end2"], tools=TOOLS)
    assert UNDONE == [8, 5]  # compensated calls are not compensated again
    with pytest.raises(UsageError, match="in the middle of step"):
        rt.rollback(agent, to_version=marks["end2"] + 1, tools=TOOLS)
    with pytest.raises(UsageError, match="exactly one"):
        rt.rollback(agent, tools=TOOLS)
    rt.close()
