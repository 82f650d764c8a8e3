"""Drift: a gradually shifting tool mix raises drift at a stated session; a stationary one never."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stead import FakeClock, Kind, Runtime
from stead.models.base import Decision
from stead.tools.base import as_tool, tool

from ..governance.agents import make_agent, runtime_at

STEPS = 10  # decisions per session


@tool(effect="read_only")
def poll(target: str) -> str:
    """Look at something."""
    return "fine"


@tool(effect="read_only")
def probe(target: str) -> str:
    """Look closer."""
    return "fine"


TOOLS = {t.__name__: as_tool(t) for t in (poll, probe)}


class Shifting:
    """In session k, ``probes(k)`` of the 10 calls are probe, the rest poll."""

    name = "shifting"

    def __init__(self, probes: Any) -> None:
        self.probes = probes

    def decide(self, context: Any) -> Decision:
        session, i = divmod(context.step, STEPS)
        name = "probe" if i < self.probes(session) else "poll"
        return Decision(({"type": "tool", "tool": name, "args": {"target": str(context.step)}},))


def sessions(tmp_path: Path, probes: Any, n: int = 10) -> tuple[Runtime, str, list[int]]:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt, tmp_path, [{"finish": "x"}], scope=[{"tool": "*"}],
        monitors={"drift": {"baseline_sessions": 3, "tool_mix": 0.4,
                            "demote_to": "act_with_approval"}},
    )  # fmt: skip
    drifted_at = []
    for k in range(n):
        before = rt.store.load_state(agent).version
        rt.run(agent, tools=TOOLS, model=Shifting(probes), max_steps=STEPS)
        new = [e for e in rt.store.read_events(agent) if e.seq > before]
        if any(e.kind == Kind.VIOLATION and e.data["rule"] == "drift" for e in new):
            drifted_at.append(k)
        clock.advance(60)
    return rt, agent, drifted_at


def test_a_gradually_shifting_tool_mix_raises_drift_at_session_6(tmp_path: Path) -> None:
    # baseline (sessions 0-2): probe is 1 call in 10; session k: k in 10. The total
    # variation distance is k/10 - 0.1, which first exceeds 0.4 at session 6.
    rt, agent, drifted_at = sessions(tmp_path, lambda k: k)
    assert drifted_at == [6, 7, 8, 9]
    state = rt.store.load_state(agent)
    assert state.autonomy == "act_with_approval"  # demoted once, at session 6
    demotions = [e for e in rt.store.read_events(agent) if e.kind == Kind.AUTONOMY_CHANGED]
    assert len(demotions) == 1 and "drift" in demotions[0].data["by"]
    profiled = [e for e in rt.store.read_events(agent) if e.kind == Kind.SESSION_PROFILED]
    assert [e.data["compared"] for e in profiled] == [False] * 3 + [True] * 7
    assert profiled[6].data["shifts"]["tool_mix"] == 0.5
    found, journaled = rt.check(agent)  # stead check sees the same drift
    assert [v.to_json() for _, v in found] == journaled
    rt.close()


def test_stationary_sessions_raise_no_drift(tmp_path: Path) -> None:
    rt, agent, drifted_at = sessions(tmp_path, lambda k: 3)
    assert drifted_at == []
    assert rt.store.load_state(agent).autonomy == "act_autonomously"
    rt.close()
