"""A streamed answer: Server-Sent Events read as they arrive, and put back together.

Both providers stream an answer as SSE (``stream: true``): OpenAI as
``chat.completion.chunk`` objects in ``data:`` lines ending with ``[DONE]``,
Anthropic as named events (``message_start``, ``content_block_start``,
``content_block_delta``, ``content_block_stop``, ``message_delta``,
``message_stop``). :class:`Events` parses the bytes as they come, so the text
the model writes can be shown at once (:meth:`Events.feed` gives each event);
:func:`openai_body` and :func:`anthropic_body` turn the whole stream back into
the answer the provider sends unstreamed, so everything after (the decision,
its usage, a refusal) is read as it always was, and only that is journaled.

What arrives is hostile until checked: the whole stream is held to the same
bounds as an unstreamed answer (its bytes by :data:`~.bounded.MAX_ANSWER_BYTES`,
its time by the request's timeout: :mod:`.http` reads both); a line with no end
is cut at that bound too, and an event whose data is not JSON makes the answer
one the service did not send in its wire format.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..canonical import strict_loads

DONE = "[DONE]"
Event = tuple[str, Any]
"""An event's name (``message`` when it has none) and its data, parsed as JSON."""


class Events:
    """SSE bytes in, events out, as they arrive (lines split on ``\\n``, ``\\r\\n``
    or ``\\r``; ``data`` lines of one event joined, comments skipped)."""

    def __init__(self, on_event: Callable[[Event], None] | None = None) -> None:
        self.events: list[Event] = []
        self._on_event = on_event
        self._pending: list[bytes] = []
        self._name = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> None:
        if b"\n" not in chunk and b"\r" not in chunk:
            self._pending.append(chunk)  # a long line: kept in pieces, joined once
            return
        data = b"".join([*self._pending, chunk])
        held = data.endswith(b"\r")  # its \n may be the next chunk's first byte
        if held:
            data = data[:-1]
        *lines, rest = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._pending = [rest + b"\r"] if held else [rest]
        for line in lines:
            self._line(line.decode("utf-8", "replace"))

    def close(self) -> list[Event]:
        """Every event of the stream, the last one ended by the stream's end."""
        last = b"".join(self._pending).rstrip(b"\r")
        if last:
            self._line(last.decode("utf-8", "replace"))
        self._pending = []
        self._line("")
        return self.events

    def _line(self, line: str) -> None:
        if not line:
            name, lines = self._name or "message", self._data
            self._name, self._data = "", []
            if lines:
                text = "\n".join(lines)
                event = (name, text if text == DONE else strict_loads(text))
                self.events.append(event)
                if self._on_event is not None:
                    self._on_event(event)
            return
        if line.startswith(":"):
            return
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._name = value
        elif field == "data":
            self._data.append(value)


def parse(content: bytes) -> list[Event]:
    """The events of a whole stream."""
    events = Events()
    events.feed(content)
    return events.close()


# -- OpenAI chat completions ---------------------------------------------------------


def openai_text(event: Event) -> str:
    """The text a chunk adds to the answer (none for the rest)."""
    data = event[1]
    if not isinstance(data, dict):
        return ""
    for choice in data.get("choices") or []:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            piece = (choice.get("delta") or {}).get("content")
            return piece if isinstance(piece, str) else ""
    return ""


def openai_body(events: list[Event]) -> dict[str, Any]:
    """The ``chat.completion`` the chunks make: content and refusal joined, each
    tool call's pieces (by ``index``) joined into one call, the usage of the last
    chunk (``stream_options.include_usage``)."""
    content: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: Any = None
    finish: Any = None
    for _, data in events:
        if data == DONE:
            break
        if not isinstance(data, dict):
            raise ValueError("a chunk that is not an object")
        if isinstance(data.get("error"), dict):
            raise ValueError(f"the stream broke off: {str(data['error'].get('message'))[:200]}")
        if data.get("usage"):
            usage = data["usage"]
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            finish = choice.get("finish_reason") or finish
            delta = choice.get("delta") or {}
            content.append(str(delta.get("content") or ""))
            refusal.append(str(delta.get("refusal") or ""))
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    int(piece["index"]),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["function"]["name"] += str(function.get("name") or "")
                call["function"]["arguments"] += str(function.get("arguments") or "")
    if not any(isinstance(data, dict) and data.get("choices") for _, data in events):
        raise ValueError("a stream with no chunk of the answer")
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(content) or None,
        "refusal": "".join(refusal) or None,
    }
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {},
    }


# -- Anthropic messages ---------------------------------------------------------------


def anthropic_text(event: Event) -> str:
    name, data = event
    if name != "content_block_delta" or not isinstance(data, dict):
        return ""
    delta = data.get("delta") or {}
    return str(delta.get("text") or "") if delta.get("type") == "text_delta" else ""


def anthropic_body(events: list[Event]) -> dict[str, Any]:
    """The ``message`` the events make: each block from its start and its deltas
    (text joined; a tool's ``input_json_delta`` pieces joined and parsed), the
    stop reason and the usage of ``message_start`` updated by ``message_delta``."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    for name, data in events:
        if not isinstance(data, dict):
            raise ValueError("an event that is not an object")
        if name == "error":
            error = data.get("error") or {}
            raise ValueError(f"the stream broke off: {str(error.get('message'))[:200]}")
        if name == "message_start":
            message = dict(data["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif name == "content_block_start":
            blocks[int(data["index"])] = dict(data["content_block"])
        elif name == "content_block_delta":
            index, delta = int(data["index"]), data["delta"]
            if delta.get("type") == "text_delta":
                block = blocks[index]
                block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif name == "message_delta" and message is not None:
            message.update({k: v for k, v in (data.get("delta") or {}).items()})
            message["usage"].update(data.get("usage") or {})
    if message is None:
        raise ValueError("a stream with no message_start")
    for index, pieces in partial.items():
        joined = "".join(pieces)
        blocks[index]["input"] = json.loads(joined) if joined.strip() else {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message
