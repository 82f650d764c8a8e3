"""A text answer on every store backend: the agent waits for its person's reply and
goes on with it; taken as a finish, it is checked as one."""

from __future__ import annotations

from pathlib import Path

from stead import Kind, Runtime

from .conftest import make_agent


def test_a_text_answer_waits_for_the_reply_and_goes_on(runtime: Runtime, tmp_path: Path) -> None:
    agent_id = make_agent(runtime, tmp_path, [{"say": "Which file?"}, {"finish": "answered"}])
    state = runtime.run(agent_id).state
    assert (state.status, state.waiting_for, state.status_reason) == (
        "waiting", "input", "Which file?"
    )  # fmt: skip
    runtime.send(agent_id, "a.txt")
    assert runtime.run(agent_id).state.status == "completed"
    kinds = [e.kind for e in runtime.store.read_events(agent_id)]
    assert kinds.count(Kind.INPUT_REQUESTED) == 1 and Kind.ANSWER_REFUSED not in kinds


def test_a_text_finish_is_checked(runtime: Runtime, tmp_path: Path) -> None:
    goal = {"id": "file", "accept": [{"files_exist": ["a.txt"]}]}
    script = [
        {"say": "done"},
        {"tool": "write_file", "args": {"path": "a.txt", "content": "a"}},
        {"complete_goal": "file"},
        {"say": "done now"},
    ]
    agent_id = make_agent(runtime, tmp_path, script, on_text="finish", goals=[goal])
    assert runtime.run(agent_id).state.status == "completed"
    events = list(runtime.store.read_events(agent_id))
    assert [e.data["summary"] for e in events if e.kind == Kind.FINISH_REJECTED] == ["done"]
    assert [e.data["summary"] for e in events if e.kind == Kind.FINISH_CLAIMED] == ["done now"]
