"""The PostgreSQL tutorial, followed as a reader would, on a schema of its own.

The page's store URL is replaced with a fresh schema of the test database (skipped
where no PostgreSQL answers, failed in CI). The model answers each call after a pause,
so the worker the page kills is mid-step when it dies; the test then checks what the
page promises: every agent completed, each was run by one of the workers, and the
killed worker's agents were finished by another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.models.fake_servers import FakeServer, Reply, openai_answer, openai_call
from tests.postgres import connect, fresh_schema, url_for

from .tutorial import LOCAL_MODEL, TUTORIALS, Reader, tool_results

PAGE = TUTORIALS / "many-workers-postgres.md"
STORE = "postgresql://postgres@127.0.0.1:5432/stead?schema=tutorial"
AGENTS = [f"doc-{n}" for n in range(1, 7)]


def answer(body: Any) -> Reply:
    """Two writes, then finish; each answer takes a while, as a real model's does."""
    done = tool_results(body)
    if done < 2:
        args = {"path": f"part{done + 1}.md", "content": "A short summary.\n"}
        call = openai_call(f"c{done}", "write_file", args)
        return Reply(body=openai_answer([call]), delay=3.0)
    done_call = openai_call("c9", "finish", {"summary": "done"})
    return Reply(body=openai_answer([done_call]), delay=3.0)


def workers_of(terminal: Reader, agent_id: str) -> list[str]:
    """The worker of each of the agent's activations, in order."""
    trace = terminal.run(f"stead --json trace {agent_id}").output
    events = [json.loads(line) for line in trace.splitlines()]
    return [e["data"]["worker"] for e in events if e["kind"] == "activation_started"]


def test_many_workers_on_postgres(reader: Reader, tmp_path: Path) -> None:
    connect().close()  # skips (fails in CI) with no PostgreSQL at 127.0.0.1:5432
    with fresh_schema() as schema, FakeServer() as model:
        model.responder = answer
        reader.replace |= {LOCAL_MODEL: model.url, STORE: url_for(schema)}
        reader.follow(PAGE, timeout=120)

        folder = tmp_path / "workers"
        pids = {n: (folder / f"worker-{n}.pid").read_text().strip() for n in (1, 2, 3)}
        listed = json.loads(reader.run("stead --json ls").output)
        assert sorted(a["agent_id"] for a in listed) == AGENTS
        assert {a["status"] for a in listed} == {"completed"}
        ran = {agent: workers_of(reader, agent) for agent in AGENTS}
        for agent, workers in ran.items():
            assert {w.split(":")[1] for w in workers} <= set(pids.values()), (agent, workers)
        killed = pids[1]
        taken = [a for a, ws in ran.items() if ws[0].split(":")[1] == killed]
        assert taken, f"the killed worker ran none of the agents: {ran}"
        for agent in taken:
            assert ran[agent][-1].split(":")[1] != killed, (agent, ran[agent])
        log = (folder / "worker-1.log").read_text()
        assert "start" in log and "end" not in log, log
