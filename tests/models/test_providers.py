"""The OpenAI-compatible and Anthropic adapters against fake servers of each wire format.

Every test sends real HTTP to a server on 127.0.0.1 whose answers are shaped as
the provider's (checked against the SDKs' types in test_fake_servers.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from stead.errors import ContextTooLong, InvalidAnswer, ModelAuthError, ModelError, SpecError
from stead.models.anthropic import AnthropicModel
from stead.models.base import Decision, RenderedContext
from stead.models.openai import OpenAIModel
from stead.models.options import parse_model
from stead.models.provider import ProviderModel
from stead.workers.parked import model_session

from .fake_servers import (
    FakeServer,
    Reply,
    anthropic_answer,
    anthropic_error,
    anthropic_text,
    anthropic_use,
    calls_in,
    openai_answer,
    openai_call,
    openai_error,
)

READ = {
    "name": "read_file",
    "effect": "read_only",
    "description": "Read a file of the workspace.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}
CONTEXT = RenderedContext(text="# Agent a\n\n## Goals\n(none)\n", hash="h", step=0, tools=[READ])


ON_LOOP = False


@pytest.fixture(params=["threads", "event-loop"])
def asking(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test twice: the model asked in the thread (``decide``, as ``stead run``
    and the threaded worker ask), and on an event loop over the parked worker's
    session (``adecide``, as ``stead work --in-flight`` asks)."""
    global ON_LOOP
    ON_LOOP = request.param == "event-loop"
    yield
    ON_LOOP = False


pytestmark = pytest.mark.usefixtures("asking")
"""Every test here, asked both ways (tests/attacks/test_model_answers.py asks the same)."""


def on_loop(model: ProviderModel, context: RenderedContext) -> Decision:
    async def ask() -> Decision:
        async with await model_session() as session:
            return await model.adecide(context, session)

    return asyncio.run(ask())


def make(provider: str, url: str, **options: Any) -> tuple[ProviderModel, list[float]]:
    slept: list[float] = []
    opts = parse_model({"provider": provider, "name": "m-1", "base_url": url, **options})
    cls = OpenAIModel if provider == "openai" else AnthropicModel
    model = cls(opts, "sk-test-KEY-0123456789", rng=random.Random(7), sleep=slept.append)
    if ON_LOOP:
        model.decide = functools.partial(on_loop, model)  # type: ignore[method-assign]
    return model, slept


# -- one builder per wire format, so each test runs against both -------------------


def tool_answer(provider: str, *calls: tuple[str, Any]) -> Reply:
    if provider == "openai":
        return Reply(200, openai_answer([openai_call(f"call_{i}", n, a) for i, (n, a) in
                                         enumerate(calls)]))  # fmt: skip
    return Reply(200, anthropic_answer([anthropic_use(f"toolu_{i}", n, a) for i, (n, a) in
                                        enumerate(calls)]))  # fmt: skip


def text_answer(provider: str, text: str) -> Reply:
    if provider == "openai":
        return Reply(200, openai_answer(text=text))
    return Reply(200, anthropic_answer([anthropic_text(text)]))


def error(provider: str, status: int, message: str) -> Reply:
    kinds = {401: "authentication_error", 429: "rate_limit_error", 500: "api_error",
             400: "invalid_request_error", 529: "overloaded_error"}  # fmt: skip
    if provider == "openai":
        code = "context_length_exceeded" if "context" in message else None
        return openai_error(status, message, kinds.get(status, "api_error"), code)
    return anthropic_error(status, kinds.get(status, "api_error"), message)


PROVIDERS = ["openai", "anthropic"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_tool_call_is_a_decision_and_the_request_is_the_wire_format(
    server: FakeServer, provider: str
) -> None:
    model, _ = make(provider, server.url)
    server.queue(tool_answer(provider, ("read_file", {"path": "notes.md"})))
    decision = model.decide(CONTEXT)
    assert decision.to_json() == [
        {"type": "tool", "tool": "read_file", "args": {"path": "notes.md"}}
    ]
    (seen,) = server.seen
    if provider == "openai":
        assert seen.path == "/v1/chat/completions"
        assert seen.headers["authorization"] == "Bearer sk-test-KEY-0123456789"
        assert seen.body["messages"][1] == {"role": "user", "content": CONTEXT.text}
    else:
        assert seen.path == "/v1/messages"
        assert seen.headers["x-api-key"] == "sk-test-KEY-0123456789"
        assert seen.headers["anthropic-version"] == "2023-06-01"
        assert seen.body["tool_choice"] == {"type": "any"}
        assert seen.body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert seen.body["messages"][0]["content"][0]["text"] == CONTEXT.text
    # the agent's tools, then the runtime's own actions
    offered = list(calls_in(seen.body))
    assert offered[0] == "read_file" and {"finish", "remember", "wait_for_input"} <= set(offered)
    assert decision.usage is not None and decision.usage["input_tokens"] == 100
    assert [a["status"] for a in decision.attempts] == [200]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_parallel_calls_are_one_decision_with_actions_in_order(
    server: FakeServer, provider: str
) -> None:
    model, _ = make(provider, server.url)
    server.queue(
        tool_answer(
            provider,
            ("remember", {"values": {"plan": "read then finish"}}),
            ("read_file", {"path": "a.txt"}),
            ("send_message", {"to": "ag_x", "text": "hi"}),
            ("wait", {"seconds": 5, "reason": "rate limit"}),
            ("finish", {"summary": "done"}),
        )
    )
    assert model.decide(CONTEXT).to_json() == [
        {"type": "remember", "values": {"plan": "read then finish"}},
        {"type": "tool", "tool": "read_file", "args": {"path": "a.txt"}},
        {"type": "message", "to": "ag_x", "text": "hi", "kind": "message"},
        {"type": "wait", "seconds": 5, "reason": "rate limit"},
        {"type": "finish", "summary": "done"},
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refusal_is_an_unusable_answer(server: FakeServer, provider: str) -> None:
    model, _ = make(provider, server.url)
    if provider == "openai":
        server.queue(Reply(200, openai_answer(refusal="I can't help with that.")))
    else:
        body = anthropic_answer([anthropic_text("I can't help with that.")], stop_reason="refusal")
        server.queue(Reply(200, body))
    with pytest.raises(InvalidAnswer, match="you refused: I can't help"):
        model.decide(CONTEXT)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_is_retried_after_what_retry_after_asks(server: FakeServer, provider: str) -> None:
    model, slept = make(provider, server.url)
    busy = error(provider, 429, "Rate limit reached")
    busy.headers = {"retry-after": "7"}
    server.queue(busy, tool_answer(provider, ("finish", {"summary": "ok"})))
    decision = model.decide(CONTEXT)
    assert decision.to_json() == [{"type": "finish", "summary": "ok"}]
    assert slept == [7.0]
    assert [a["status"] for a in decision.attempts] == [429, 200]
    assert "Rate limit" in decision.attempts[0]["error"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_5xx_and_timeouts_back_off_exponentially_then_give_up(
    server: FakeServer, provider: str
) -> None:
    model, slept = make(provider, server.url, max_retries=3, timeout=1)
    server.queue(
        error(provider, 500, "internal"),
        Reply(200, openai_answer(text="late"), delay=1.6),  # past the 1 s timeout
        error(provider, 529 if provider == "anthropic" else 503, "overloaded"),
        error(provider, 502, "bad gateway"),
    )
    with pytest.raises(ModelError, match="gave no answer after 4 attempts") as err:
        model.decide(CONTEXT)
    assert [a.status for a in err.value.attempts] == [500, None, 529 if provider ==
                                                     "anthropic" else 503, 502]  # fmt: skip
    assert err.value.attempts[1].error == "timed out"
    # 0.5, 1, 2 seconds, each jittered down by at most half
    assert len(slept) == 3
    for wait, base in zip(slept, (0.5, 1.0, 2.0), strict=True):
        assert base / 2 <= wait <= base


@pytest.mark.parametrize("provider", PROVIDERS)
def test_401_stops_at_once_and_says_what_to_do(server: FakeServer, provider: str) -> None:
    model, slept = make(provider, server.url)
    server.queue(error(provider, 401, "Incorrect API key provided"))
    with pytest.raises(ModelAuthError, match="refused the API key") as err:
        model.decide(CONTEXT)
    assert "stead secret set" in str(err.value) and slept == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_context_too_long_answer_is_its_own_error(server: FakeServer, provider: str) -> None:
    model, _ = make(provider, server.url)
    words = (
        "This model's maximum context length is 8192 tokens"
        if provider == "openai"
        else "prompt is too long: 210000 tokens > 200000 maximum"
    )
    server.queue(error(provider, 400, words))
    with pytest.raises(ContextTooLong):
        model.decide(CONTEXT)


def test_the_request_is_the_same_bytes_for_the_same_context(server: FakeServer) -> None:
    model, _ = make("openai", server.url, temperature=0.3, max_tokens=512)
    server.queue(tool_answer("openai", ("finish", {"summary": "a"})))
    server.queue(tool_answer("openai", ("finish", {"summary": "a"})))
    model.decide(CONTEXT)
    model.decide(CONTEXT)
    first, second = (json.dumps(s.body, sort_keys=True) for s in server.seen)
    assert first == second
    assert server.seen[0].body["temperature"] == 0.3
    assert server.seen[0].body["max_tokens"] == 512


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("gemini:pro", "provider 'gemini' is not one this stead speaks"),
        ("openai:", "model name '' is missing"),
        ({"provider": "openai", "name": "m", "base_url": "ftp://x"}, "not an http"),
        ({"provider": "openai", "name": "m", "base_url": "http://u:p@h"}, "credentials"),
        ({"provider": "openai", "name": "m", "temperature": 3}, "'temperature' must be"),
        ({"provider": "openai", "name": "m", "max_tokens": 1.5}, "whole number"),
        ({"provider": "openai", "name": "m", "api_key": "sk-x"}, "'api_key' is not a model option"),
        ({"provider": "anthropic", "name": "m", "api_key_secret": "a b"}, "not a secret name"),
        ({"provider": "openai", "name": "m", "context_window": 4096}, "at most half"),
        (
            {
                "provider": "openai",
                "name": "m",
                "summarizer": {"provider": "openai", "name": "s", "summarizer": "openai:t"},
            },
            "cannot name a summarizer",
        ),
        (7, "must be text"),
        ({"provider": "openai", "name": "m", "compact_at": 0.95}, "'compact_at' must be"),
        ({"provider": "openai", "name": "m", "compact_to": 0.3}, "at most half of compact_at"),
        (
            {"provider": "openai", "name": "m", "compact_at": 0.2, "compact_to": 0.15},
            "compact_to (0.15) must be at most half of compact_at (0.2)",
        ),
    ],
)
def test_bad_model_options_are_refused_naming_what_is_wrong(value: Any, problem: str) -> None:
    with pytest.raises(SpecError, match="spec field 'model'") as err:
        parse_model(value)
    assert problem in str(err.value)


def test_openais_own_endpoint_gets_max_completion_tokens() -> None:
    opts = parse_model({"provider": "openai", "name": "o4-mini", "max_tokens": 900})
    model = OpenAIModel(opts, None)
    body = model.request(CONTEXT, [])
    assert body["max_completion_tokens"] == 900 and "max_tokens" not in body
    local = OpenAIModel(parse_model({"provider": "openai", "name": "m",
                                     "base_url": "http://127.0.0.1:1/v1"}), None)  # fmt: skip
    assert local.request(CONTEXT, [])["max_tokens"] == 4096
    model.close()
    local.close()


def test_tool_names_a_provider_cannot_take_are_refused_at_creation(tmp_path: Any) -> None:
    from stead import Runtime, parse_spec

    for ref, problem in (
        ("tests.models.named_tools:my_finish", "one of the runtime's own actions"),
        ("tests.models.named_tools:look_up", "1 to 64 letters"),
    ):
        spec = parse_spec({"name": "a", "model": "openai:m", "tools": [ref]}, ".")
        with pytest.raises(SpecError, match=problem):
            Runtime.check_loads(spec)


def test_prices_come_from_the_table_or_the_operators_file(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stead.models import prices

    assert prices.spend_of("openai", "gpt-4o-mini", 1_000_000, 1_000_000, 0) == 0.75
    assert prices.spend_of("openai", "my-model", 10**6, 10**6, 0) == 0  # unknown: free
    (tmp_path / "prices.json").write_text(
        '{"openai:my-model": {"input": 1.0, "output": 2.0, "cached_input": 0.5}}'
    )
    monkeypatch.setenv("STEAD_MODEL_PRICES", str(tmp_path / "prices.json"))
    # 600,000 fresh input at $1, 400,000 cached at $0.5, 1,000,000 output at $2
    assert prices.spend_of("openai", "my-model", 1_000_000, 1_000_000, 400_000) == 2.8
