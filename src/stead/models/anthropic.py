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
from .conversation import Turn
from .encoding import Growing
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
        return {
            **self._head(context),
            "messages": _messages(context),
            "tools": _tools(tools),
            **self._settings(),
        }

    def _head(self, context: RenderedContext) -> dict[str, Any]:
        system = f"{SYSTEM_PROMPT}\n\n{context.system}" if context.messages else SYSTEM_PROMPT
        return {
            "model": self.options.name,
            "max_tokens": self.options.max_tokens,
            "system": [{"type": "text", "text": system, "cache_control": _CACHE}],
        }

    def _settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool_choice": {"type": "any"}}
        if self.options.temperature is not None:
            out["temperature"] = min(self.options.temperature, 1.0)
        return out

    def encode(self, context: RenderedContext, tools: list[ToolSpec]) -> bytes:
        body = self.kept(_Body)
        for t in body.begin(context):
            body.add(t)
        if not context.messages or body.irregular:
            return super().encode(context, tools)
        # the turns after the final ones go on a copy: they may change by the next step
        step = body.copy()
        for t in context.messages[body.count : -1]:
            step.add(t)
        if step.irregular or context.messages[-1].role != "user":
            body.irregular = True  # not the shape the parts are kept for: as a whole
            return super().encode(context, tools)
        messages = step.close(context.messages[-1])
        body.encoded += step.encoded
        return b"".join((
            b"{", body.fields(self._head(context)),
            b',"messages":[', messages,
            b'],"tools":', body.tools(context, lambda: _tools(tools)),
            b",", body.fields({**self._settings(), **self.stream_fields()}), b"}",
        ))  # fmt: skip

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
_BEGIN = {"role": "user", "content": [{"type": "text", "text": "Begin."}]}


def _tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": dict(t.parameters) or {"type": "object"},
        }
        for t in tools
    ]


def _blocks(t: Turn) -> list[dict[str, Any]]:
    """The content blocks of one turn (a user-side turn has one)."""
    if t.role == "assistant":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": t.text}] if t.text else []
        return blocks + [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.args)} for c in t.calls
        ]
    if t.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": t.call_id, "content": t.text}
        if t.is_error:
            block["is_error"] = True
        return [block]
    return [{"type": "text", "text": t.text}]


def _messages(context: RenderedContext) -> list[dict[str, Any]]:
    """Turns as Anthropic takes them: user and assistant alternating, each call's
    result a ``tool_result`` block of the user message after it; a cache breakpoint
    on the last block before the status, which changes every step."""
    if not context.messages:
        return [{"role": "user", "content": [{"type": "text", "text": context.text}]}]
    out: list[dict[str, Any]] = []
    for t in context.messages:
        if t.role == "assistant":
            out.append({"role": "assistant", "content": _blocks(t)})
            continue
        if not out or out[-1]["role"] != "user":
            out.append({"role": "user", "content": []})
        out[-1]["content"] += _blocks(t)
    if out[0]["role"] != "user":
        out.insert(0, _BEGIN)
    stable = [b for m in out for b in m["content"]][:-1]
    if stable:
        stable[-1]["cache_control"] = _CACHE
    return out


class _Body(Growing):
    """The messages of the final turns: those closed, encoded, and the last one
    still open (a user message takes the blocks of the turns after it; its last
    block may be the one that carries the cache breakpoint)."""

    def __init__(self) -> None:
        super().__init__()
        self.reset()

    def reset(self) -> None:
        self.before: bytes | bytearray = b""  # the closed messages of the body a step copied
        self.done = bytearray()  # closed messages, each followed by a comma
        self.role = ""  # of the open message ("": none yet)
        self.open: list[dict[str, Any]] = []  # its blocks
        self.parts: list[bytes] = []  # and their JSON
        self.irregular = False

    def copy(self) -> _Body:
        """A body to add this step's other turns to, leaving this one as it is."""
        other = _Body()
        other.before = self.done  # read, never written, by the copy: no need to copy it
        other.role, other.open, other.parts = self.role, list(self.open), list(self.parts)
        other.irregular = self.irregular
        return other

    def add(self, t: Turn) -> None:
        blocks = _blocks(t)
        role = "assistant" if t.role == "assistant" else "user"
        if not blocks:  # no block for the breakpoint to stand on: sent as a whole
            self.irregular = True
            return
        if not self.role and role == "assistant":
            self.done += self.json(_BEGIN) + b","
        if role == "assistant" or role != self.role:
            self._close(self.parts)
            self.role = role
        self.open += blocks
        self.parts += [self.json(b) for b in blocks]

    def _close(self, parts: list[bytes]) -> None:
        if self.role:
            content = b",".join(parts)
            self.done += b'{"role":"' + self.role.encode() + b'","content":[' + content + b"]},"
            self.open, self.parts = [], []

    def close(self, status: Turn) -> bytes | bytearray:
        """The messages with ``status`` last, the breakpoint on the block before it."""
        parts = list(self.parts)
        if self.open:
            parts[-1] = self.json({**self.open[-1], "cache_control": _CACHE})
        (block,) = _blocks(status)
        if self.role != "user":
            self._close(parts)
            self.role, parts = "user", []
        self._close([*parts, self.json(block)])
        return self.before + memoryview(self.done)[:-1]
