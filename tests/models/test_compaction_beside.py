"""A live model's summary is asked beside the decision, and journaled after it.

Near its budget, the conversation's summary is asked on a thread of its own
while the model is asked for the step's decision; the step journals the
decision (asked with the turns the summary replaces) and then the compaction.
A recorded run keeps its requests in order: there, nothing is asked beside.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from stead import Kind, parse_spec
from stead.errors import ContextTooLong
from stead.models.base import Decision, RenderedContext
from stead.models.provider import Summary
from stead.models.summaries import AHEAD

from .agents import runtime
from .fake_servers import FakeServer, Reply, openai_answer
from .test_conversation import make
from .test_providers import tool_answer


class Conversing:
    """A model shown the conversation, with a small budget, that sees whether its
    summary is being asked while it is asked for a decision: near its budget, the
    decision waits for the summary to be in progress, and the summary for it."""

    conversation = True
    name = "fake:conversing"

    def __init__(self, live: bool) -> None:
        self.live = live
        self.asked = 0
        self.summarizing = threading.Event()
        self.decided = threading.Event()
        self.overlapped: list[bool] = []

    def budget(self) -> int:
        return 6_000  # the beside window (a tenth of it) is wider than a step adds

    def keep(self) -> int:
        return 1_000

    def request_tokens(self, context: RenderedContext) -> int:
        return context.size // 4

    def summarize(self, text: str) -> Summary:
        self.summarizing.set()
        self.decided.wait(timeout=30 if self.live else 0)
        self.decided.clear()
        self.summarizing.clear()
        return Summary("summary: pages read", {"tokens": 50.0}, (), self.name)

    def decide(self, context: RenderedContext) -> Decision:
        self.asked += 1
        if self.live and self.request_tokens(context) > AHEAD * self.budget():
            # a summary is due: it must be in progress while this decision is asked
            self.overlapped.append(self.summarizing.wait(timeout=30))
            self.decided.set()
        if self.asked >= 80:
            return Decision(({"type": "finish", "summary": "read them all"},))
        page = {"type": "tool", "tool": "read_file", "args": {"path": f"page{self.asked % 3}.txt"}}
        return Decision((page,))

    def close(self) -> None:
        pass


def run_conversing(
    tmp_path: Path, live: bool, model: Conversing | None = None
) -> tuple[Conversing, list[Any]]:
    (tmp_path / "seed").mkdir()
    for i in range(3):
        (tmp_path / "seed" / f"page{i}.txt").write_text(f"page {i} " + "word " * 300)
    rt = runtime(tmp_path)
    spec = {"name": "reader", "model": "program:conversing", "tools": ["read_file"],
            "workspace": "seed"}  # fmt: skip
    agent_id = rt.create(parse_spec(spec, tmp_path)).agent_id
    model = model or Conversing(live)
    state = rt.run(agent_id, model=model, max_steps=100).state
    assert state.status == "completed", state.status_reason
    events = list(rt.store.read_events(agent_id))
    rt.close()
    return model, events


def test_a_live_models_summary_is_asked_beside_the_decision(tmp_path: Path) -> None:
    model, events = run_conversing(tmp_path, live=True)
    compactions = [i for i, e in enumerate(events) if e.kind == Kind.CONTEXT_COMPACTED]
    assert len(compactions) >= 2 and model.overlapped and all(model.overlapped)
    for i in compactions:  # right after the decision it was asked beside, covering before it
        decision = events[i - 1]
        assert decision.kind == Kind.DECISION
        assert events[i].data["through"] < decision.seq
        assert events[i].data["usage"]["tokens"] == 50  # its cost is counted in that step
    totals = [e.data["usage"]["total_tokens"] for e in events if "usage" in e.data]
    assert totals[-1] == 50 * len(compactions)


def test_a_model_that_is_not_live_is_compacted_before_the_decision(tmp_path: Path) -> None:
    model, events = run_conversing(tmp_path, live=False)
    compactions = [i for i, e in enumerate(events) if e.kind == Kind.CONTEXT_COMPACTED]
    assert compactions and not model.overlapped
    assert all(events[i + 1].kind == Kind.DECISION for i in compactions)


class TooLongOnce(Conversing):
    """Answers "too long" to the first decision asked beside a summary."""

    told = False

    def decide(self, context: RenderedContext) -> Decision:
        decision = super().decide(context)
        if self.overlapped and not self.told:
            self.told = True
            raise ContextTooLong("the request is longer than the window")
        return decision


def test_a_summary_overtaken_by_a_forced_compaction_is_not_used(tmp_path: Path) -> None:
    """The decision asked beside a summary was refused as too long: the retry compacts
    further, and the summary asked beside (an older cut) is then not journaled."""
    model, events = run_conversing(tmp_path, live=True, model=TooLongOnce(live=True))
    assert model.told
    cuts = [e.data["through"] for e in events if e.kind == Kind.CONTEXT_COMPACTED]
    assert cuts == sorted(set(cuts))  # never back to an older cut


def test_a_recorded_model_is_asked_one_request_after_the_other(
    tmp_path: Path, server: FakeServer
) -> None:
    (tmp_path / "seed").mkdir()
    for i in range(3):
        (tmp_path / "seed" / f"page{i}.txt").write_text(f"page {i} " + "word " * 300)
    rt = runtime(tmp_path)
    agent_id = make(rt, tmp_path, "openai", server.url, context_window=16_384, max_tokens=256)
    decisions = {"n": 0}

    def respond(body: Any) -> Reply:
        if "tools" not in body:
            return Reply(200, openai_answer(text="summary: read"))
        decisions["n"] += 1
        if decisions["n"] >= 60:
            return tool_answer("openai", ("complete_goal", {"id": "read"}),
                               ("finish", {"summary": "done"}))  # fmt: skip
        return tool_answer("openai", ("read_file", {"path": f"page{decisions['n'] % 3}.txt"}))

    server.responder = respond
    state = rt.run(agent_id, max_steps=100, record_model=tmp_path / "rec.jsonl").state
    assert state.status == "completed"
    events = list(rt.store.read_events(agent_id))
    compactions = [i for i, e in enumerate(events) if e.kind == Kind.CONTEXT_COMPACTED]
    assert compactions  # made when the budget was reached, before that step's decision
    assert all(events[i + 1].kind == Kind.DECISION for i in compactions)
    rt.close()
