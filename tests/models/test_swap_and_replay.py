"""Swapping a live agent's model (after a worker was killed mid-call), and turning a
recorded run into an offline regression test."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stead import Kind, Runtime, parse_spec

from .agents import VAULT_KEY, runtime
from .fake_servers import FakeServer, Reply
from .test_providers import error, text_answer, tool_answer

DONE = (("complete_goal", {"id": "note"}), ("finish", {"summary": "note written"}))


def spec(model: Any, instructions: str = "Write note.txt, read it, finish.") -> dict[str, Any]:
    return {
        "name": "noter",
        "instructions": instructions,
        "model": model,
        "tools": ["write_file", "read_file"],
        "goals": [{"id": "note", "description": "note.txt written"}],
        "on_text": "refuse",  # the recording holds a refused text answer
    }


def kinds(rt: Runtime, agent_id: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent_id) if e.kind == kind]


@pytest.mark.chaos
def test_a_model_swapped_after_a_kill_mid_call_carries_the_conversation_over(
    tmp_path: Path, server: FakeServer
) -> None:
    rt = runtime(tmp_path)
    first = {"provider": "openai", "name": "gpt-a", "base_url": server.url}
    agent_id = rt.create(parse_spec(spec(first), tmp_path)).agent_id
    server.queue(tool_answer("openai", ("write_file", {"path": "note.txt", "content": "hi"})))
    assert rt.run(agent_id, max_steps=1).state.decisions == 1
    rt.close()
    # a worker process is killed while the model is thinking about step 2
    server.queue(Reply(200, tool_answer("openai", *DONE).body, delay=30))
    env = {**os.environ, "STEAD_SECRET_KEY": base64.b64encode(VAULT_KEY).decode()}
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]
    worker = subprocess.Popen(
        [sys.executable, "-m", "stead", "resume", agent_id, *store, "--json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while len(server.seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.seen) == 2, "the worker never asked the model"
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    rt = runtime(tmp_path)
    assert len(kinds(rt, agent_id, Kind.DECISION)) == 1  # the call in flight left nothing
    with FakeServer() as other:
        second = {"provider": "anthropic", "name": "claude-b", "base_url": other.url}
        rt.set_model(agent_id, second)
        other.queue(tool_answer("anthropic", ("read_file", {"path": "note.txt"})))
        other.queue(tool_answer("anthropic", *DONE))
        state = rt.run(agent_id).state
        assert state.status == "completed", state.status_reason
        decisions = kinds(rt, agent_id, Kind.DECISION)
        models = [d["model"] for d in decisions]
        assert models == ["openai:gpt-a", "anthropic:claude-b", "anthropic:claude-b"]
        (changed,) = kinds(rt, agent_id, Kind.MODEL_CHANGED)
        assert changed["model"] == "anthropic:claude-b" and changed["by"]
        # the new provider is shown the old one's call and result, in its own format
        messages = other.seen[0].body["messages"]
        uses = [b for m in messages for b in m["content"] if b["type"] == "tool_use"]
        results = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
        assert uses[0]["name"] == "write_file" and uses[0]["input"]["path"] == "note.txt"
        assert results[0]["tool_use_id"] == uses[0]["id"]
    assert (rt.workspace(agent_id, "default").root / "note.txt").read_text() == "hi"
    rt.close()


def test_a_recorded_run_replays_offline_and_a_changed_context_fails_naming_it(
    tmp_path: Path, server: FakeServer
) -> None:
    recording = tmp_path / "run.jsonl"
    rt = runtime(tmp_path)
    live = {"provider": "openai", "name": "gpt-a", "base_url": server.url}
    recorded = rt.create(parse_spec(spec(live), tmp_path)).agent_id
    rt.vault().set("default", "OPENAI_API_KEY", SECRET, to=["127.0.0.1"], at=rt.clock.now())
    busy = error("openai", 429, "slow down")
    busy.headers = {"retry-after": "0"}
    server.queue(
        tool_answer("openai", ("write_file", {"path": "note.txt", "content": "hello"})),
        busy,
        text_answer("openai", "I wrote it."),
        tool_answer("openai", ("read_file", {"path": "note.txt"})),
        tool_answer("openai", *DONE),
    )
    assert rt.run(recorded, record_model=recording).state.status == "completed"
    assert server.seen[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in recording.read_text()  # headers are not recorded
    lines = recording.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "stead-model-recording/1" and len(lines) == 6

    # offline: the server is gone, the recording answers
    server.replies.clear()
    replayed = rt.create(parse_spec(spec(f"replay:{recording}"), tmp_path)).agent_id
    state = rt.run(replayed).state
    assert state.status == "completed", state.status_reason

    def trail(agent_id: str) -> list[Any]:
        return [
            (e.kind, e.data.get("context_hash"), e.data.get("model"))
            for e in rt.store.read_events(agent_id)
            if e.kind in (Kind.DECISION, Kind.ANSWER_REFUSED)
        ]

    assert trail(replayed) == trail(recorded)
    assert len(server.seen) == 5  # nothing reached the network during the replay

    # the same recording, but the agent is told something else: the replay names it
    changed = rt.create(
        parse_spec(spec(f"replay:{recording}", "Write note.md instead."), tmp_path)
    ).agent_id
    state = rt.run(changed).state
    assert state.status == "needs_attention"
    assert "request 1 differs from the recording: message 1 (system)" in state.status_reason
    assert "Write note.md instead." in state.status_reason
    rt.close()


SECRET = "sk-recorded-4411aa"


def test_a_recording_made_before_answers_were_streamed_still_replays(
    tmp_path: Path, server: FakeServer
) -> None:
    recording = tmp_path / "old.jsonl"
    rt = runtime(tmp_path)
    live = {"provider": "openai", "name": "gpt-a", "base_url": server.url}
    recorded = rt.create(parse_spec(spec(live), tmp_path)).agent_id
    rt.vault().set("default", "OPENAI_API_KEY", SECRET, to=["127.0.0.1"], at=rt.clock.now())
    # answered whole, as before streaming (raw: the fake does not turn it into events)
    for answer in (tool_answer("openai", ("write_file", {"path": "note.txt", "content": "hi"})),
                   tool_answer("openai", ("read_file", {"path": "note.txt"})),
                   tool_answer("openai", *DONE)):  # fmt: skip
        server.queue(Reply(200, raw=json.dumps(answer.body).encode()))
    assert rt.run(recorded, record_model=recording).state.status == "completed"
    # the recording as such a run wrote it: requests that asked for no stream
    header, *lines = recording.read_text().splitlines()
    old = []
    for line in lines:
        exchange = json.loads(line)
        assert exchange["request"].pop("stream") is True
        exchange["request"].pop("stream_options", None)
        assert "content_type" not in exchange
        old.append(json.dumps(exchange))
    recording.write_text("\n".join([header, *old]) + "\n")

    server.replies.clear()
    replayed = rt.create(parse_spec(spec(f"replay:{recording}"), tmp_path)).agent_id
    state = rt.run(replayed).state
    assert state.status == "completed", state.status_reason
    assert len(server.seen) == 3  # nothing reached the network during the replay
    hashes = [[e.data["context_hash"] for e in rt.store.read_events(a) if e.kind == Kind.DECISION]
              for a in (recorded, replayed)]  # fmt: skip
    assert hashes[0] == hashes[1]
    rt.close()


def test_a_recording_that_is_not_one_is_refused_when_the_spec_is_read(tmp_path: Path) -> None:
    from stead.errors import SpecError

    (tmp_path / "bad.jsonl").write_text('{"format": "something else"}\n')
    with pytest.raises(SpecError, match="is not a stead model recording"):
        parse_spec(spec("replay:bad.jsonl"), tmp_path)
    with pytest.raises(SpecError, match="cannot read the model recording"):
        parse_spec(spec("replay:missing.jsonl"), tmp_path)


def test_model_set_from_the_command_line(tmp_path: Path, server: FakeServer) -> None:
    from stead.cli.main import main

    rt = runtime(tmp_path)
    agent_id = rt.create(parse_spec(spec("openai:gpt-a"), tmp_path)).agent_id
    rt.close()
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]
    env = {"STEAD_SECRET_KEY": base64.b64encode(VAULT_KEY).decode()}
    with pytest.MonkeyPatch.context() as m:
        for k, v in env.items():
            m.setenv(k, v)
        assert (
            main(["model", "set", agent_id, "openai:llama3", "--base-url", server.url, *store]) == 0
        )
        assert main(["model", "set", agent_id, "gemini:pro", *store]) == 2
    rt = runtime(tmp_path)
    state = rt.store.load_state(agent_id)
    assert state.model_override is not None
    assert state.model_override["model_options"]["base_url"] == server.url
    server.queue(tool_answer("openai", *DONE))
    rt.run(agent_id)
    assert server.seen[0].body["model"] == "llama3"
    rt.close()


@pytest.mark.parametrize(
    "line",
    [
        '{"request": {}, "status": "200", "answer": {}}',
        '{"request": {}, "status": 200, "answer": {"raw": 7}}',
        '{"request": {}, "status": 999, "answer": {}}',
        '{"request": {}, "status": 200, "answer": {}, "retry_after": 5}',
        '{"request": ' + "[" * 50_000 + "]" * 50_000 + ', "status": 200, "answer": {}}',
        '{"request": {}, "status": 200, "answer": {"x": NaN}}',
    ],
)
def test_a_damaged_recording_is_refused_naming_the_line(tmp_path: Path, line: str) -> None:
    from stead.errors import SpecError

    header = {"format": "stead-model-recording/1", "model": {"provider": "openai", "name": "m"}}
    (tmp_path / "r.jsonl").write_text(json.dumps(header) + "\n" + line + "\n")
    with pytest.raises(SpecError, match="recording"):
        parse_spec(spec("replay:r.jsonl"), tmp_path)


def test_a_running_agents_model_is_swapped_before_its_next_decision(
    tmp_path: Path, server: FakeServer
) -> None:
    import threading

    rt = runtime(tmp_path)
    first = {"provider": "openai", "name": "gpt-a", "base_url": server.url}
    agent_id = rt.create(parse_spec(spec(first), tmp_path)).agent_id
    write = tool_answer("openai", ("write_file", {"path": "note.txt", "content": "hi"}))
    server.queue(Reply(200, write.body, delay=1.5))
    with FakeServer() as other:
        other.queue(tool_answer("anthropic", ("read_file", {"path": "note.txt"})))
        other.queue(tool_answer("anthropic", *DONE))
        outcome: list[Any] = []
        worker = threading.Thread(target=lambda: outcome.append(rt.run(agent_id)))
        worker.start()
        deadline = time.monotonic() + 10
        while not server.seen and time.monotonic() < deadline:
            time.sleep(0.02)
        # the worker holds the lease, waiting on its model: the swap is left for it
        swapped = {"provider": "anthropic", "name": "claude-b", "base_url": other.url}
        rt.set_model(agent_id, swapped)
        rt.clock.advance(1)  # type: ignore[attr-defined]  # a worker looks every half second
        worker.join(timeout=30)
        assert outcome and outcome[0].state.status == "completed", outcome[0].state.status_reason
        assert len(server.seen) == 1 and len(other.seen) == 2
    models = [d["model"] for d in kinds(rt, agent_id, Kind.DECISION)]
    assert models == ["openai:gpt-a", "anthropic:claude-b", "anthropic:claude-b"]
    (changed,) = kinds(rt, agent_id, Kind.MODEL_CHANGED)
    assert changed["model"] == "anthropic:claude-b"
    rt.close()


def test_a_compacted_run_replays_and_a_replay_resumes_where_it_stopped(
    tmp_path: Path, server: FakeServer
) -> None:
    from .test_conversation import _long_run_responder

    (tmp_path / "seed").mkdir()
    for i in range(3):
        (tmp_path / "seed" / f"page{i}.txt").write_text(f"page {i} " + "word " * 120)
    recording = tmp_path / "long.jsonl"
    model = {"provider": "openai", "name": "gpt-a", "base_url": server.url,
             "context_window": 4096, "max_tokens": 256}  # fmt: skip

    def long_spec(m: Any) -> dict[str, Any]:
        data = spec(m, "Read the files and remember what they say.")
        data.update({"workspace": "seed", "tools": ["read_file"], "limits": {"max_steps": 500}})
        data["goals"] = [{"id": "read", "description": "every file read"}]
        return data

    rt = runtime(tmp_path)
    recorded = rt.create(parse_spec(long_spec(model), tmp_path)).agent_id
    server.responder = _long_run_responder([], 80, "openai")
    assert rt.run(recorded, record_model=recording).state.status == "completed"
    compactions = [e for e in rt.store.read_events(recorded) if e.kind == Kind.CONTEXT_COMPACTED]
    assert compactions, "the run should have been compacted"
    asked = len(server.seen)

    replayed = rt.create(parse_spec(long_spec(f"replay:{recording}"), tmp_path)).agent_id
    assert rt.run(replayed, max_steps=30).state.status == "running"
    rt.close()
    rt = runtime(tmp_path)  # a new worker resumes the replay where the journal says it is
    state = rt.run(replayed).state
    assert state.status == "completed", state.status_reason
    assert len(server.seen) == asked  # all of it offline

    def trail(agent_id: str) -> list[Any]:
        return [
            (e.kind, e.data.get("context_hash"), e.data.get("summary"))
            for e in rt.store.read_events(agent_id)
            if e.kind in (Kind.DECISION, Kind.CONTEXT_COMPACTED)
        ]

    assert trail(replayed) == trail(recorded)
    rt.close()
