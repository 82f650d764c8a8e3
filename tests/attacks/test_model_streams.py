"""Boundary: streamed model answers (docs/security.md).

A model's answer now arrives as Server-Sent Events, and the service that sends
them may be broken or hostile. What must never happen: a stream without end,
or one delta of a gigabyte, costs the worker more memory or time than an
unstreamed answer may (the same 16 MiB and the same timeout, as the bytes
arrive); a stream that breaks off or is not the wire format crashes the worker
or becomes a decision; the text shown live to watchers holds the agent's
secrets, or grows without bound.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stead.errors import ModelError
from stead.livetext import CHANNEL, MAX_TEXT, Piece

from ..models import conftest as model_fixtures
from ..models import test_providers as providers
from ..models.agents import runtime
from ..models.fake_servers import FakeServer, Reply, sse
from ..models.test_providers import CONTEXT, PROVIDERS, make
from ..models.test_real_agent import KEY, agent
from .memory import MB, PeakRss

server = model_fixtures.server
asking = providers.asking
STREAM = {"content-type": "text/event-stream"}


def _delta(provider: str, text: str) -> bytes:
    if provider == "openai":
        choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
        return sse({"object": "chat.completion.chunk", "choices": [choice]})
    delta = {"type": "text_delta", "text": text}
    return sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")


def _start(provider: str) -> bytes:
    if provider == "openai":
        return b""
    message = {"id": "msg_x", "type": "message", "role": "assistant", "content": [],
               "model": "m", "stop_reason": None, "usage": {"input_tokens": 1}}  # fmt: skip
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    return sse({"type": "message_start", "message": message}, "message_start") + sse(
        block, "content_block_start"
    )


def _endless(provider: str, size: int, every: float = 0.0) -> Iterator[bytes]:
    """Well-formed deltas of ``size`` bytes each, for ever."""
    yield _start(provider)
    while True:
        yield _delta(provider, "x" * size)
        if every:
            time.sleep(every)


def _one_huge(provider: str) -> Iterator[bytes]:
    """One delta whose data line never ends: a gigabyte, then more."""
    yield _start(provider)
    yield b'data: {"choices": [{"index": 0, "delta": {"content": "'
    chunk = b"y" * (64 * 1024)
    for _ in range(1024 * MB // len(chunk)):
        yield chunk


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("shape", ["endless-deltas", "one-huge-delta"])
def test_a_stream_past_the_bound_is_cut_off_while_it_arrives(
    server: FakeServer, provider: str, shape: str
) -> None:
    model, _ = make(provider, server.url)
    chunks = _endless(provider, 8192) if shape == "endless-deltas" else _one_huge(provider)
    server.queue(Reply(200, headers=STREAM, chunks=chunks))
    with PeakRss() as memory, pytest.raises(ModelError, match="longer than 16 MiB"):
        model.decide(CONTEXT)
    assert memory.growth < 150 * MB, f"reading it took {memory.growth // MB} MB"


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_that_drips_for_ever_ends_at_the_timeout(
    server: FakeServer, provider: str
) -> None:
    model, _ = make(provider, server.url, timeout=2, max_retries=0)
    server.queue(Reply(200, headers=STREAM, chunks=_endless(provider, 3, every=0.2)))
    started = time.monotonic()
    with pytest.raises(ModelError, match="gave no answer after 1 attempts"):
        model.decide(CONTEXT)
    assert time.monotonic() - started < 2 + 3


@pytest.mark.usefixtures("asking")
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "body",
    [b"data: {not json\n\n", b"data: [1, 2]\n\n", b"event: error\ndata: {\"type\": \"error\", "
     b"\"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
     b"data: " + b"[" * 100_000 + b"\n\n", b""],
    ids=["not-json", "not-an-object", "error-event", "nested-deep", "empty"],
)  # fmt: skip
def test_a_broken_stream_is_a_model_error_never_a_crash_or_a_decision(
    server: FakeServer, provider: str, body: bytes
) -> None:
    model, _ = make(provider, server.url, max_retries=0)
    server.queue(Reply(200, headers=STREAM, chunks=iter([body])))
    with pytest.raises(ModelError, match="stream that is not in its wire format"):
        model.decide(CONTEXT)


def test_live_text_is_redacted_and_bounded(tmp_path: Path, server: FakeServer) -> None:
    """A key the model writes, split across deltas, never reaches a watcher; the text
    watchers are shown stops growing at MAX_TEXT."""
    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, "openai", server.url, max_retries=0)
    pieces = [KEY[:5], KEY[5:], " and then " + "z" * (MAX_TEXT * 2)]

    def stream() -> Iterator[bytes]:
        for p in pieces:
            yield _delta("openai", p)
            time.sleep(0.15)
        finish = {"name": "finish", "arguments": json.dumps({"summary": "s"})}
        call = {"index": 0, "id": "c1", "type": "function", "function": finish}
        yield sse({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        yield b"data: [DONE]\n\n"

    server.queue(Reply(200, headers=STREAM, chunks=stream()))
    seen: list[Piece] = []
    stop = CHANNEL.watch(agent_id, seen.append)
    try:
        rt.run(agent_id, max_steps=1)
    finally:
        stop()
    assert seen and seen[-1].done
    assert all(KEY not in p.text and KEY[5:] not in p.text for p in seen)
    assert all(len(p.text) <= MAX_TEXT for p in seen)
    rt.close()
