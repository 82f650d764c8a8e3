"""The Anthropic messages wire format.

``POST {base_url}/messages`` with the agent's tools (``input_schema``) and
``tool_choice: any``, so the model must call one; the answer's ``tool_use``
blocks are the decision. The system part carries a cache breakpoint, so the
provider's prompt cache serves what does not change between steps; the cached
tokens it reports are journaled with the decision's usage.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidAnswer
from . import sse
from .actions import ToolCall, ToolSpec
from .base import RenderedContext
from .provider import SYSTEM_PROMPT, ProviderModel, count

API_VERSION = "2023-06-01"


class AnthropicModel(ProviderModel):
    service = "the Anthropic service"

    def endpoint(self) -> str:
        return f"{self.options.base_url}/messages"

    def headers(self) -> dict[str, str]:
        out = {"anthropic-version": API_VERSION}
        if self._key:
            out["x-api-key"] = self._key
        return out

    def request(self, context: RenderedContext, tools: list[ToolSpec]) -> dict[str, Any]:
        system = f"{SYSTEM_PROMPT}\n\n{context.system}" if context.messages else SYSTEM_PROMPT
        body: dict[str, Any] = {
            "model": self.options.name,
            "max_tokens": self.options.max_tokens,
            "system": [{"type": "text", "text": system, "cache_control": _CACHE}],
            "messages": _messages(context),
            "tools": [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": dict(t.parameters) or {"type": "object"},
                }
                for t in tools
            ],
            "tool_choice": {"type": "any"},
        }
        if self.options.temperature is not None:
            body["temperature"] = min(self.options.temperature, 1.0)
        return body

    def side_request(self, system: str, text: str) -> dict[str, Any]:
        return {
            "model": self.options.name,
            "max_tokens": self.options.max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
        }

    def stream_fields(self) -> dict[str, Any]:
        return {"stream": True}

    def assemble(self, events: list[sse.Event]) -> Any:
        return sse.anthropic_body(events)

    def text_of(self, event: sse.Event) -> str:
        return sse.anthropic_text(event)

    def read_answer(self, body: Any) -> tuple[list[ToolCall], str, dict[str, int]]:
        usage = body.get("usage") or {}
        cached = count(usage.get("cache_read_input_tokens"))
        tokens = {
            # input_tokens counts only what was neither read from nor written to the cache
            "input": count(usage.get("input_tokens"))
            + cached
            + count(usage.get("cache_creation_input_tokens")),
            "output": count(usage.get("output_tokens")),
            "cached": cached,
        }
        blocks = body["content"]
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        if body.get("stop_reason") == "refusal":
            raise InvalidAnswer(f"you refused: {text[:500]}")
        calls = [
            ToolCall(str(b["id"]), str(b["name"]), json.dumps(b.get("input", {})))
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        return calls, text, tokens


_CACHE = {"type": "ephemeral"}


def _messages(context: RenderedContext) -> list[dict[str, Any]]:
    """Turns as Anthropic takes them: user and assistant alternating, each call's
    result a ``tool_result`` block of the user message after it; a cache breakpoint
    on the last block before the status, which changes every step."""
    if not context.messages:
        return [{"role": "user", "content": [{"type": "text", "text": context.text}]}]
    out: list[dict[str, Any]] = []
    for t in context.messages:
        if t.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": t.text}] if t.text else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.args)}
                for c in t.calls
            ]
            out.append({"role": "assistant", "content": blocks})
            continue
        if t.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": t.call_id,
                "content": t.text,
            }
            if t.is_error:
                block["is_error"] = True
        else:
            block = {"type": "text", "text": t.text}
        if not out or out[-1]["role"] != "user":
            out.append({"role": "user", "content": []})
        out[-1]["content"].append(block)
    if out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "Begin."}]})
    stable = [b for m in out for b in m["content"]][:-1]
    if stable:
        stable[-1]["cache_control"] = _CACHE
    return out
