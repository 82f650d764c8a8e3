"""The fake servers' answers parse as the providers' own SDK types, so the adapters
are tested against what the real services send, not against our guess of it."""

from __future__ import annotations

from anthropic.types import Message
from openai.types.chat import ChatCompletion

from .fake_servers import (
    anthropic_answer,
    anthropic_text,
    anthropic_use,
    as_stream,
    openai_answer,
    openai_call,
)


def test_openai_answers_are_chat_completions() -> None:
    for body in (
        openai_answer([openai_call("call_1", "read_file", {"path": "a"})]),
        openai_answer(
            [openai_call("call_1", "a", {}), openai_call("call_2", "b", "{")], cached_tokens=50
        ),
        openai_answer(text="just words"),
        openai_answer(refusal="I can't help with that."),
    ):
        parsed = ChatCompletion.model_validate(body)
        assert parsed.choices[0].message.role == "assistant"
        assert parsed.usage is not None and parsed.usage.prompt_tokens == 100


def test_anthropic_answers_are_messages() -> None:
    for body in (
        anthropic_answer([anthropic_use("toolu_1", "read_file", {"path": "a"})]),
        anthropic_answer([anthropic_text("thinking"), anthropic_use("toolu_2", "finish", {})]),
        anthropic_answer([anthropic_text("only words")], cache_read=40, cache_write=10),
        anthropic_answer([anthropic_text("no")], stop_reason="refusal"),
    ):
        parsed = Message.model_validate(body)
        assert parsed.role == "assistant" and parsed.usage.input_tokens == 100


def test_openai_streams_are_chat_completion_chunks() -> None:
    from openai.types.chat import ChatCompletionChunk

    from stead.models import sse

    calls = [openai_call("call_1", "a", {"x": "y" * 40}), openai_call("call_2", "b", {})]
    events = sse.parse(b"".join(as_stream(openai_answer(calls, "some words"))))
    assert events[-1] == ("message", sse.DONE)
    chunks = [ChatCompletionChunk.model_validate(data) for _, data in events[:-1]]
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 100
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_anthropic_streams_are_message_stream_events() -> None:
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    from stead.models import sse

    body = anthropic_answer([anthropic_text("words"), anthropic_use("toolu_1", "f", {"a": 1})])
    adapter: TypeAdapter[object] = TypeAdapter(RawMessageStreamEvent)
    events = sse.parse(b"".join(as_stream(body)))
    for name, data in events:
        if name == "ping":
            continue
        parsed = adapter.validate_python(data)
        assert parsed.type == name  # the event's name is its type
