"""Provider models ask for their answers streamed, show the text as it is written,
and make the same decision of the stream as of the unstreamed answer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stead import parse_spec
from stead.livetext import CHANNEL, Piece
from stead.models import sse

from .fake_servers import (
    FakeServer,
    Reply,
    anthropic_answer,
    anthropic_text,
    anthropic_use,
    as_stream,
    openai_answer,
    openai_call,
)
from .test_providers import CONTEXT, PROVIDERS, asking, make

__all__ = ["asking"]

pytestmark = pytest.mark.usefixtures("asking")

WORDS = "First I read the notes, then I decide what to write."


def answer(provider: str) -> Reply:
    if provider == "openai":
        calls = [openai_call("call_1", "read_file", {"path": "notes.md"})]
        return Reply(200, openai_answer(calls, WORDS, prompt_tokens=321, completion_tokens=45))
    blocks = [anthropic_text(WORDS), anthropic_use("toolu_1", "read_file", {"path": "notes.md"})]
    return Reply(200, anthropic_answer(blocks, input_tokens=321, output_tokens=45))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_request_asks_for_a_stream_and_the_decision_is_the_unstreamed_one(
    server: FakeServer, provider: str
) -> None:
    model, _ = make(provider, server.url)
    server.queue(answer(provider))
    streamed = model.decide(CONTEXT)
    sent = server.seen[-1].body
    assert sent["stream"] is True
    if provider == "openai":
        assert sent["stream_options"] == {"include_usage": True}
    assert streamed.to_json() == [
        {"type": "tool", "tool": "read_file", "args": {"path": "notes.md"}}
    ]
    assert streamed.usage is not None
    assert (streamed.usage["input_tokens"], streamed.usage["output_tokens"]) == (321, 45)
    # a service that answers unstreamed all the same is read as before
    server.queue(Reply(200, raw=json.dumps(answer(provider).body).encode()))
    assert model.decide(CONTEXT).to_json() == streamed.to_json()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_text_is_published_as_it_streams_for_the_agent_only(
    server: FakeServer, provider: str
) -> None:
    model, _ = make(provider, server.url)
    model.speak_for("ag_streaming", lambda text: text.replace("notes", "[n]"))
    mine: list[Piece] = []
    others: list[Piece] = []
    stop_mine = CHANNEL.watch("ag_streaming", mine.append)
    stop_others = CHANNEL.watch("ag_someone_else", others.append)
    try:
        server.queue(answer(provider))
        model.decide(CONTEXT)
    finally:
        stop_mine()
        stop_others()
    assert not others
    assert mine[-1] == Piece("ag_streaming", WORDS.replace("notes", "[n]"), done=True, step=1)
    assert all(WORDS.replace("notes", "[n]").startswith(p.text) for p in mine)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_fake_streams_are_the_wire_format_the_assemblers_read(provider: str) -> None:
    body = answer(provider).body
    events = sse.parse(b"".join(as_stream(body)))
    assert len(events) > 5  # pieces, not one event
    assembled = sse.openai_body(events) if provider == "openai" else sse.anthropic_body(events)
    if provider == "openai":
        assert assembled["choices"][0]["message"]["content"] == WORDS
        assert (
            assembled["choices"][0]["message"]["tool_calls"]
            == body["choices"][0]["message"]["tool_calls"]
        )
        assert assembled["usage"] == body["usage"]
    else:
        assert assembled["content"] == body["content"]
        assert assembled["usage"]["output_tokens"] == 45 and assembled["stop_reason"] == "tool_use"


def test_sse_lines_split_anywhere_make_the_same_events() -> None:
    stream = b"".join(as_stream(answer("anthropic").body)).replace(b"\n", b"\r\n")
    whole = sse.parse(stream)
    fed = sse.Events()
    for i in range(0, len(stream), 3):
        fed.feed(stream[i : i + 3])
    assert fed.close() == whole


def test_a_run_on_two_threads_publishes_each_agents_text_to_its_watchers(
    tmp_path: Path, server: FakeServer
) -> None:
    """Two agents' models stream at once: each watcher sees only its agent's words."""
    models = []
    for agent_id in ("ag_a", "ag_b"):
        model, _ = make("openai", server.url)
        model.speak_for(agent_id, lambda text: text)
        models.append(model)
    server.responder = lambda _body: answer("openai")
    seen: dict[str, list[Piece]] = {"ag_a": [], "ag_b": []}
    stops = [CHANNEL.watch(a, seen[a].append) for a in seen]
    try:
        threads = [threading.Thread(target=m.decide, args=(CONTEXT,)) for m in models]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for stop in stops:
            stop()
    for agent_id, pieces in seen.items():
        assert pieces and all(p.agent_id == agent_id for p in pieces) and pieces[-1].done


def test_a_recorded_run_still_shows_the_text_as_it_streams(
    tmp_path: Path, server: FakeServer
) -> None:
    from stead import Kind

    from .agents import runtime
    from .test_real_agent import agent

    def slowly(body: dict[str, object]) -> Iterator[bytes]:
        for chunk in as_stream(body):
            time.sleep(0.03)
            yield chunk

    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, "openai", server.url)
    calls = [openai_call("call_1", "finish", {"summary": "done"})]
    body = openai_answer(calls, "A long thought, written slowly, piece by piece, to the end.")
    server.queue(Reply(200, headers={"content-type": "text/event-stream"}, chunks=slowly(body)))
    recording = tmp_path / "run.jsonl"
    seen: list[Piece] = []
    stop = CHANNEL.watch(agent_id, seen.append)
    try:
        assert rt.run(agent_id, record_model=recording).state.status == "completed"
    finally:
        stop()
    assert [p.done for p in seen].count(False) >= 2 and seen[-1].done  # as it came
    (line,) = [json.loads(x) for x in recording.read_text().splitlines()[1:]]
    assert line["content_type"] == "text/event-stream" and "data: [DONE]" in line["answer"]["raw"]
    same = {"name": "writer", "instructions": "Write hello.txt, read it back, then finish.",
            "model": f"replay:{recording}", "tools": ["write_file", "read_file"]}  # fmt: skip
    replayed = rt.create(parse_spec(same, tmp_path)).agent_id
    assert rt.run(replayed).state.status == "completed"
    decisions = [e for e in rt.store.read_events(replayed) if e.kind == Kind.DECISION]
    assert decisions[0].data["actions"][0]["type"] == "finish"
    rt.close()
