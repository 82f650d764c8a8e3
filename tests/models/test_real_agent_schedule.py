"""A schedule wakes an agent driven by a provider's model over HTTP (both wire
formats): the model is asked again with the schedule's message in its request,
hibernated or not, and what it then asks for is judged by the agent's grants,
not by the schedule: a call its scope does not allow is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stead import Kind
from stead.clock import FakeClock
from stead.schedules import Schedules, fire_due
from stead.workers.threaded import Worker

from .agents import provider_agent, runtime
from .fake_servers import FakeServer
from .test_providers import text_answer, tool_answer

KEY = "sk-live-4f1c9a7e2b8d6035"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_schedule_wakes_a_provider_agent_and_its_scope_still_decides(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    clock = rt.clock
    assert isinstance(clock, FakeClock)
    agent = provider_agent(
        rt, tmp_path, provider, server.url, KEY, name="reporter",
        instructions="Write the report when told.", tools=["write_file", "read_file"],
        scope=[{"tool": "write_file", "args": {"path": {"one_of": ["report.txt"]}}}],
    )  # fmt: skip
    server.queue(text_answer(provider, "Ready when the schedule says."))
    assert rt.run(agent).state.status == "waiting"
    rt.hibernate(agent)
    told = "It is seven: write today's report to report.txt."
    made = Schedules(rt).add(agent_id=agent, cron="0 7 * * *", tz="Europe/Berlin", message=told)
    assert made.next_due is not None
    clock.advance(made.next_due - clock.now() + 1)
    server.queue(
        tool_answer(
            provider,
            ("write_file", {"path": "report.txt", "content": "all well"}),
            ("read_file", {"path": "secret.txt"}),
        ),
        text_answer(provider, "Report written."),
    )
    report = Worker(rt, concurrency=1).run_until_idle()
    assert report.ran == {agent: "waiting"}, report
    asked = json.dumps(server.seen[1].body)
    assert "It is seven: write today's report to report.txt." in asked
    assert "A scheduled run has come" in asked
    events = list(rt.store.read_events(agent))
    kinds = [e.kind for e in events]
    assert Kind.RESTORED in kinds  # it was hibernated: the firing woke it
    results = {e.data["tool"]: e.data for e in events if e.kind == Kind.TOOL_RESULT}
    assert results["write_file"]["ok"] and not results["read_file"]["ok"]
    assert "out of scope" in results["read_file"]["error"]  # outside its grants
    ws = rt.workspace(agent, "default")
    assert (ws.root / "report.txt").read_text(encoding="utf-8") == "all well"
    assert fire_due(rt).delivered == []  # once per due time
    rt.close()
