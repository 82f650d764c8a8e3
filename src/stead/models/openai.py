"""The OpenAI chat-completions wire format (OpenAI, Ollama, vLLM, llama.cpp, LiteLLM...).

``POST {base_url}/chat/completions`` with the agent's tools as ``function``
tools; the answer's ``tool_calls`` are the decision. A refusal
(``message.refusal``) or an answer with no tool call is an unusable answer,
shown back to the model.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidAnswer
from . import sse
from .actions import ToolCall, ToolSpec
from .base import RenderedContext
from .conversation import Turn
from .encoding import Growing
from .provider import SYSTEM_PROMPT, ProviderModel, count


class OpenAIModel(ProviderModel):
    service = "the OpenAI-compatible service"

    def endpoint(self) -> str:
        return f"{self.options.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._key}"} if self._key else {}

    def request(self, context: RenderedContext, tools: list[ToolSpec]) -> dict[str, Any]:
        return {
            "model": self.options.name,
            "messages": _messages(context),
            "tools": _tools(tools),
            **self._settings(),
        }

    def _settings(self) -> dict[str, Any]:
        # OpenAI's own API takes max_completion_tokens (its reasoning models refuse
        # max_tokens); the servers that speak its format take max_tokens
        out: dict[str, Any] = {self._max_key(): self.options.max_tokens}
        if self.options.temperature is not None:
            out["temperature"] = self.options.temperature
        return out

    def encode(self, context: RenderedContext, tools: list[ToolSpec]) -> bytes:
        if not context.messages:
            return super().encode(context, tools)
        body = self.kept(_Body)
        for t in body.begin(context):
            body.done += b"," + body.json(_message(t))
        tail = b"".join(b"," + body.json(_message(t)) for t in context.messages[body.count :])
        system = body.json(_system(context))
        return b"".join((
            b'{"model":', body.json(self.options.name),
            b',"messages":[', system, body.done, tail,
            b'],"tools":', body.tools(context, lambda: _tools(tools)),
            b",", body.fields({**self._settings(), **self.stream_fields()}), b"}",
        ))  # fmt: skip

    def _max_key(self) -> str:
        official = self.options.base_url.startswith("https://api.openai.com/")
        return "max_completion_tokens" if official else "max_tokens"

    def side_request(self, system: str, text: str) -> dict[str, Any]:
        return {
            "model": self.options.name,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": text},
            ],
            self._max_key(): self.options.max_tokens,
        }

    def stream_fields(self) -> dict[str, Any]:
        return {"stream": True, "stream_options": {"include_usage": True}}

    def assemble(self, events: list[sse.Event]) -> Any:
        return sse.openai_body(events)

    def text_of(self, event: sse.Event) -> str:
        return sse.openai_text(event)

    def read_answer(self, body: Any) -> tuple[list[ToolCall], str, dict[str, int]]:
        message = body["choices"][0]["message"]
        usage = body.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        tokens = {
            "input": count(usage.get("prompt_tokens")),
            "output": count(usage.get("completion_tokens")),
            "cached": count(details.get("cached_tokens")),
        }
        if message.get("refusal"):
            raise InvalidAnswer(f"you refused: {str(message['refusal'])[:500]}")
        calls = [
            ToolCall(str(c["id"]), str(c["function"]["name"]), str(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []
            if c.get("type", "function") == "function"
        ]
        return calls, str(message.get("content") or ""), tokens


class _Body(Growing):
    """The encoded messages of the conversation's final turns, each after a comma."""

    def __init__(self) -> None:
        super().__init__()
        self.done = bytearray()

    def reset(self) -> None:
        self.done = bytearray()


def _tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters) or {"type": "object"},
            },
        }
        for t in tools
    ]


def _system(context: RenderedContext) -> dict[str, Any]:
    return {"role": "system", "content": f"{SYSTEM_PROMPT}\n\n{context.system}"}


def _messages(context: RenderedContext) -> list[dict[str, Any]]:
    if not context.messages:  # a context rendered as one document
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": context.text},
        ]
    return [_system(context), *(_message(t) for t in context.messages)]


def _message(t: Turn) -> dict[str, Any]:
    if t.role == "assistant":
        turn: dict[str, Any] = {"role": "assistant", "content": t.text or None}
        if t.calls:  # the API refuses an empty list: a text answer has none
            turn["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.args_json},
                }
                for c in t.calls
            ]
        return turn
    if t.role == "tool":
        return {"role": "tool", "tool_call_id": t.call_id, "content": t.text}
    return {"role": "user", "content": t.text}
