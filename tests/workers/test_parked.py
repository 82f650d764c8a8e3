"""The parked worker: agents in flight while their models think, on a few threads.

Its models are fake services of the OpenAI wire format on 127.0.0.1; the one
that proves the agents wait together answers no agent's first question until
every agent has asked it, which a worker holding a thread per agent on fewer
threads than agents could never reach.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stead import Kind, Runtime, SystemClock, parse_spec
from stead.cli.main import main
from stead.integrity.audit import audit
from stead.workers.parked import ParkedWorker
from stead.workers.threaded import Worker
from tests.models.fake_servers import FakeServer, Reply, openai_answer, openai_call
from tests.workers.test_threaded import make_agents, store_of

KEY = "sk-live-parked-0001"


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_the_parked_worker_runs_every_agent_to_the_end(tmp_path: Path, backend: str) -> None:
    with store_of(backend, tmp_path) as store:
        rt = Runtime(store, tmp_path / "data", clock=SystemClock())
        agents = make_agents(rt, tmp_path, count=24, steps=5)
        report = ParkedWorker(rt, in_flight=10, threads=3).run_until_idle()
        assert report.ran == dict.fromkeys(agents, "completed"), report.errors
        assert report.steps == 24 * 6 and not report.errors and not report.busy
        for agent in agents:
            state = rt.store.load_state(agent)
            assert state.memory == {"n": 4}
            assert sorted(state.manifest) == [f"f{n}.txt" for n in range(5)]
            assert audit(rt.store, agent).ok
        assert ParkedWorker(rt, in_flight=10, threads=3).run_until_idle().ran == {}
        rt.close()


class Gate:
    """Holds every first question until ``count`` agents have asked one: then all are
    answered. ``gave_up`` counts the questions whose wait ran out first (so that
    ``count`` agents were never waiting at once)."""

    def __init__(self, count: int, wait: float = 60.0) -> None:
        self.count, self.wait = count, wait
        self.asked = 0
        self.opened = False
        self.gave_up = 0
        self._lock = threading.Lock()
        self._all_asked = threading.Event()

    def first_question(self) -> None:
        with self._lock:
            self.asked += 1
            if self.asked == self.count:
                self._all_asked.set()
        if self._all_asked.wait(self.wait):
            self.opened = True
        else:
            with self._lock:
                self.gave_up += 1


class GatedReply(Reply):
    """A reply the fake sends once the gate is open (it reads ``delay`` before sending)."""

    def __init__(self, gate: Gate, body: Any) -> None:
        super().__init__(200, body)
        self._gate = gate

    @property  # type: ignore[override]
    def delay(self) -> float:
        self._gate.first_question()
        return 0.0

    @delay.setter
    def delay(self, value: float) -> None:
        pass


def answering(gate: Gate | None) -> Any:
    """A stateless model: write a note (held at the gate), then finish."""

    def respond(body: Any) -> Reply:
        asked = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if asked == 0:
            call = openai_call("c0", "write_file", {"path": "note.txt", "content": "hi"})
            answer = openai_answer([call])
            return GatedReply(gate, answer) if gate is not None else Reply(200, answer)
        return Reply(200, openai_answer([openai_call("c1", "finish", {"summary": "noted"})]))

    return respond


def provider_agents(rt: Runtime, tmp_path: Path, url: str, count: int) -> list[str]:
    rt.vault().set(
        "default", "OPENAI_API_KEY", KEY, to=["127.0.0.1", "localhost"], at=rt.clock.now()
    )
    spec = parse_spec(
        {
            "name": "noter",
            "instructions": "Write note.txt, then finish.",
            "model": {"provider": "openai", "name": "m-1", "base_url": url},
            "tools": ["write_file"],
        },
        tmp_path,
    )
    return [rt.create(spec).agent_id for _ in range(count)]


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    from tests.models.agents import runtime

    r = runtime(tmp_path)
    r.clock = SystemClock()
    yield r
    r.close()


def stead_threads() -> set[str]:
    return {t.name for t in threading.enumerate()}


def test_hundreds_of_agents_wait_on_their_models_at_once_on_a_few_threads(
    rt: Runtime, tmp_path: Path
) -> None:
    count, threads = 150, 3
    gate = Gate(count)
    seen_threads: set[str] = set()
    with FakeServer() as server:
        server.responder = answering(gate)
        agents = provider_agents(rt, tmp_path, server.url, count)

        def watch() -> None:
            while not gate.opened and gate.asked < count:
                seen_threads.update(stead_threads())
                threading.Event().wait(0.01)

        watcher = threading.Thread(target=watch)
        watcher.start()
        report = ParkedWorker(rt, in_flight=count, threads=threads).run_until_idle()
        watcher.join()
    assert gate.opened and not gate.gave_up, f"{gate.gave_up} agents waited alone"
    assert report.ran == dict.fromkeys(agents, "completed"), report.errors
    # a thread per agent neither to run it nor to renew its lease
    assert len({n for n in seen_threads if n.startswith("stead-agent")}) <= threads
    assert not {n for n in seen_threads if n.startswith("lease-")}
    for agent in agents:
        assert (rt.workspace(agent, "default").root / "note.txt").read_text() == "hi"
        decisions = [e for e in rt.store.read_events(agent) if e.kind == Kind.DECISION]
        attempts = [d.data["attempts"] for d in decisions]
        assert [a[-1]["status"] for a in attempts] == [200, 200], attempts
    # the key went in a header of every request and into nothing the agents stored
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in server.seen)
    assert all(KEY not in json.dumps(s.body) for s in server.seen)


def test_the_threaded_worker_cannot_hold_that_many_on_as_few_threads(
    rt: Runtime, tmp_path: Path
) -> None:
    """The same gate with the threaded worker: it proves the gate tells the two apart."""
    count = 12
    gate = Gate(count, wait=1.0)
    with FakeServer() as server:
        server.responder = answering(gate)
        provider_agents(rt, tmp_path, server.url, count)
        Worker(rt, concurrency=3).run_until_idle()
    assert gate.asked == count and gate.gave_up >= count - 3


def test_a_service_s_errors_and_retries_on_the_event_loop_reach_the_journal(
    rt: Runtime, tmp_path: Path
) -> None:
    with FakeServer() as server:
        # a service's cookie must not ride on other agents' requests over the shared client
        busy = Reply(
            429,
            {"error": {"message": "slow down"}},
            headers={"retry-after": "0", "set-cookie": "session=agent-one; Path=/"},
        )
        server.queue(busy)
        server.responder = answering(None)
        # by name: a cookie jar may take no cookies from a bare address anyway
        named = server.url.replace("127.0.0.1", "localhost")
        ok = provider_agents(rt, tmp_path, named, 1)[0]
        ParkedWorker(rt, in_flight=4, threads=2).run_until_idle()
        server.responder = lambda body: Reply(400, {"error": {"message": "no such model m-1"}})
        broken = provider_agents(rt, tmp_path, server.url, 1)[0]
        report = ParkedWorker(rt, in_flight=4, threads=2).run_until_idle()
    assert len(server.seen) == 4 and not any("cookie" in s.headers for s in server.seen)
    first = next(e for e in rt.store.read_events(ok) if e.kind == Kind.DECISION)
    assert [a["status"] for a in first.data["attempts"]] == [429, 200]
    assert rt.store.load_state(ok).status == "completed"
    state = rt.store.load_state(broken)
    assert report.ran == {broken: "needs_attention"}
    assert "no such model m-1" in state.status_reason and "HTTP 400" in state.status_reason


def test_an_agent_taken_over_while_parked_writes_nothing_more(rt: Runtime, tmp_path: Path) -> None:
    count = 6
    gate = Gate(count)
    with FakeServer() as server:
        server.responder = answering(gate)
        agents = provider_agents(rt, tmp_path, server.url, count)
        victim = agents[0]
        took: list[int] = []
        original = gate.first_question

        def take_over_then_wait() -> None:
            with gate._lock:
                last = gate.asked == count - 1
            if last:  # every agent is parked on its model: another worker takes one
                held = rt.store.get_lease(victim)
                assert held is not None
                lease = rt.store.acquire_lease(
                    victim, "elsewhere:1:1", 30.0, rt.clock.now(), takeover=held.owner
                )
                took.append(lease.epoch)
            original()

        gate.first_question = take_over_then_wait  # type: ignore[method-assign]
        report = ParkedWorker(rt, in_flight=count, threads=2).run_until_idle()
    assert gate.opened and not gate.gave_up and took
    assert "epoch" in report.errors[victim], report.errors
    events = list(rt.store.read_events(victim))
    assert all(e.epoch < took[0] for e in events), "the parked worker wrote after the takeover"
    assert not (rt.workspace(victim, "default").root / "note.txt").exists()
    assert all(rt.store.load_state(a).status == "completed" for a in agents[1:])


def test_stead_work_in_flight_runs_the_store_s_agents_parked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'db' / 'stead.db'}"
    rt = Runtime(url, tmp_path / "db")
    agents = make_agents(rt, tmp_path, count=9, steps=2)
    rt.close()
    code = main(["work", "--store", url, "--in-flight", "6", "--concurrency", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ran"] == dict.fromkeys(agents, "completed")
    assert report["steps"] == 9 * 3 and report["errors"] == {}
