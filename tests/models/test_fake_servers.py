"""The fake servers' answers parse as the providers' own SDK types, so the adapters
are tested against what the real services send, not against our guess of it."""

from __future__ import annotations

from anthropic.types import Message
from openai.types.chat import ChatCompletion

from .fake_servers import (
    anthropic_answer,
    anthropic_text,
    anthropic_use,
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
