"""Provenance: lineage walks back along what flowed into a call, impact walks forward."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.errors import NotFound
from stead.tools.base import as_tool, tool

from ..governance.agents import make_agent, runtime_at

TOKEN = "TOKEN-abc123xyz-42"


@tool(effect="idempotent")
def poll(target: str) -> str:
    """Look at something."""
    return f"{target} is fine"


@tool(effect="idempotent")
def mint() -> str:
    """Make a token."""
    return TOKEN


@tool(effect="effectful")
def use(token: str, step: int) -> str:
    """Use a token."""
    return f"done {step}"


TOOLS = {t.__name__: as_tool(t) for t in (poll, mint, use)}
SCRIPT: list[Any] = [
    {"tool": "poll", "args": {"target": "a"}},
    {"tool": "poll", "args": {"target": "b"}},
    {"tool": "mint"},  # step 3
    {"tool": "poll", "args": {"target": "c"}},  # step 4: independent
    {"tool": "use", "args": {"token": TOKEN, "step": 5}},
    {"tool": "poll", "args": {"target": "d"}},
    {"tool": "poll", "args": {"target": "e"}},
    {"tool": "use", "args": {"token": TOKEN, "step": 8}},
    {"finish": "done"},
]


def steps_of(rt: Runtime, agent: str) -> dict[int, dict[str, int]]:
    """For each step: the seqs of its decision, intent and result."""
    out: dict[int, dict[str, int]] = {}
    step = 0
    for e in rt.store.read_events(agent):
        if e.kind == Kind.DECISION:
            step = e.data["step"]
            out[step] = {"decision": e.seq}
        elif e.kind == Kind.TOOL_INTENT:
            out[step]["intent"] = e.seq
        elif e.kind == Kind.TOOL_RESULT:
            out[step]["result"] = e.seq
    return out


@pytest.fixture
def ran(tmp_path: Path) -> tuple[Runtime, str, dict[int, dict[str, int]]]:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(rt, tmp_path, SCRIPT, scope=[{"tool": "*"}])
    assert rt.run(agent, tools=TOOLS).state.status == "completed"
    return rt, agent, steps_of(rt, agent)


def test_impact_of_a_result_lists_what_used_it_and_nothing_else(ran: Any) -> None:
    rt, agent, steps = ran
    impact = {n.seq for n in rt.provenance(agent).impact(steps[3]["result"])}
    assert impact == {
        steps[5]["intent"],
        steps[5]["result"],
        steps[8]["intent"],
        steps[8]["result"],
    }
    assert not impact & set(steps[4].values())  # the independent step is not in it


def test_lineage_of_a_later_call_reaches_the_result_it_used(ran: Any) -> None:
    rt, agent, steps = ran
    lineage = {n.seq: n for n in rt.provenance(agent).lineage(steps[8]["result"])}
    assert steps[3]["result"] in lineage and lineage[steps[3]["result"]].tool == "mint"
    assert steps[8]["decision"] in lineage
    assert steps[4]["result"] not in lineage


def test_decisions_record_the_results_their_context_showed(ran: Any) -> None:
    rt, agent, steps = ran
    decision = next(e for e in rt.store.read_events(agent) if e.seq == steps[4]["decision"])
    assert decision.data["context_events"] == [steps[i]["result"] for i in (1, 2, 3)]


def test_quarantine_flags_downstream_and_stops_the_agent(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(rt, tmp_path, SCRIPT, scope=[{"tool": "*"}])
    rt.run(agent, tools=TOOLS, max_steps=6)  # running: steps 1-6 done
    steps = steps_of(rt, agent)
    status, downstream = rt.quarantine(agent, steps[3]["result"], "the token was forged")
    assert downstream == [steps[5]["intent"], steps[5]["result"]]
    assert status == "needs_attention"
    (v,) = rt.store.load_state(agent).violations.values()
    assert v["rule"] == "quarantine" and v["events"][0] == steps[3]["result"]
    assert rt.run(agent, tools=TOOLS).state.status == "needs_attention"  # it stays stopped
    found, journaled = rt.check(agent)  # a person's quarantine is not a monitor's finding
    assert [x.to_json() for _, x in found] == journaled
    with pytest.raises(NotFound):
        rt.quarantine(agent, 10_000, "no such event")
    rt.close()


def test_quarantine_stops_an_agent_a_worker_is_running(tmp_path: Path) -> None:
    """The person cannot take the lease; the worker journals the request before its next step."""
    import threading

    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(rt, tmp_path, SCRIPT, scope=[{"tool": "*"}])
    at_step_6 = threading.Event()
    go_on = threading.Event()

    @tool(name="poll", effect="idempotent")
    def slow_poll(target: str) -> str:
        if target == "d":  # step 6: hold the worker here while the person acts
            at_step_6.set()
            assert go_on.wait(10)
        return f"{target} is fine"

    worker = runtime_at(tmp_path, clock)
    tools = {**TOOLS, "poll": as_tool(slow_poll)}
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(worker.run(agent, tools=tools)))
    thread.start()
    assert at_step_6.wait(10)
    steps = steps_of(rt, agent)
    status, downstream = rt.quarantine(agent, steps[3]["result"], "the token was forged")
    assert status == "stopping" and downstream == [steps[5]["intent"], steps[5]["result"]]
    clock.advance(1)  # the worker looks for requests every half second
    go_on.set()
    thread.join(10)
    state = outcome[0].state
    assert state.status == "needs_attention" and "quarantine" in state.status_reason
    assert state.decisions == 6  # it stopped before step 7 was decided
    assert rt.store.signals(agent) == []  # journaled, then dropped
    (v,) = state.violations.values()
    assert v["events"][0] == steps[3]["result"]
    worker.close()
    rt.close()


LINK = "https://evil.example/pay?to=ATTACKER-77"


@tool(effect="read_only")
def read_mail() -> str:
    """A long e-mail whose injected link sits far past the first 800 characters."""
    return "Dear customer, " + "lorem ipsum " * 300 + f"please visit {LINK} now. " + "x" * 500


@tool(effect="effectful")
def send(text: str) -> str:
    """Send a message."""
    return "sent"


def mail_and_send(events: list[Any]) -> tuple[int, Any]:
    """The seq of the mail's result, and the send's intent."""
    mail = next(
        e.seq for e in events if e.kind == Kind.TOOL_RESULT and e.data["tool"] == "read_mail"
    )
    sent = next(e for e in events if e.kind == Kind.TOOL_INTENT and e.data["tool"] == "send")
    return mail, sent


NO_DATAFLOW = {"dataflow": {"off": True}}


@pytest.mark.parametrize("restart", [False, True])
def test_a_flow_from_far_into_a_long_result_is_traced(tmp_path: Path, restart: bool) -> None:
    """Provenance used to read the state's 800-character copy of each result."""
    tools = {t.__name__: as_tool(t) for t in (read_mail, send)}
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    script: list[Any] = [{"tool": "read_mail"}]
    if restart:
        script.append({"wait_for_input": "go on?"})  # a new activation reads it back
    script += [{"tool": "send", "args": {"text": LINK}}, {"finish": "done"}]
    # provenance of a call that runs: the default data-flow rule would ask first
    agent = make_agent(rt, tmp_path, script, scope=[{"tool": "*"}], monitors=NO_DATAFLOW)
    rt.run(agent, tools=tools)
    if restart:
        rt.close()
        rt = runtime_at(tmp_path, clock)
        rt.send(agent, "yes")
        rt.run(agent, tools=tools)
    events = list(rt.store.read_events(agent))
    mail = next(
        e.seq for e in events if e.kind == Kind.TOOL_RESULT and e.data["tool"] == "read_mail"
    )
    sent = next(e for e in events if e.kind == Kind.TOOL_INTENT and e.data["tool"] == "send")
    assert sent.data["provenance"]["flows_from"] == [mail]
    assert mail in [n.seq for n in rt.provenance(agent).lineage(sent.seq)]
    rt.close()


def test_a_link_rewritten_into_a_new_sentence_is_traced(tmp_path: Path) -> None:
    """No whole line of the mail is in the message, only its link, rewritten."""
    tools = {t.__name__: as_tool(t) for t in (read_mail, send)}
    rt = runtime_at(tmp_path, FakeClock())
    script: list[Any] = [
        {"tool": "read_mail"},
        {
            "tool": "send",
            "args": {"text": "Hi! As asked, here it is: https://EVIL.example/pay?to=ATTACKER-77."},
        },
        {"finish": "done"},
    ]
    # provenance of a call that runs: the default data-flow rule would ask first
    agent = make_agent(rt, tmp_path, script, scope=[{"tool": "*"}], monitors=NO_DATAFLOW)
    rt.run(agent, tools=tools)
    events = list(rt.store.read_events(agent))
    mail = next(
        e.seq for e in events if e.kind == Kind.TOOL_RESULT and e.data["tool"] == "read_mail"
    )
    sent = next(e for e in events if e.kind == Kind.TOOL_INTENT and e.data["tool"] == "send")
    assert sent.data["provenance"]["flows_from"] == [mail]
    rt.close()
