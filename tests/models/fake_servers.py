"""Fake model services on 127.0.0.1 that speak the providers' real wire formats.

Each server answers POSTs from a queue of :class:`Reply` objects, in order,
and records every request (path, headers, JSON body). The bodies are built
here exactly as the providers send them; ``tests/models/test_fake_servers.py``
checks them against the official SDKs' own response types.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # a worker's hundreds of agents may connect at once


@dataclass
class Reply:
    """One answer: a status, headers, a JSON body (or raw bytes, or chunks), after a delay."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunks: Iterable[bytes] | None = None
    """A body sent piece by piece as the iterable gives them, with no length: it ends
    when the connection closes (a hostile service's endless or dripping answer)."""


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """A threaded HTTP server answering from a queue; ``url`` is its base URL."""

    def __init__(self, prefix: str = "/v1") -> None:
        self.replies: list[Reply] = []
        self.seen: list[Seen] = []
        self.default: Reply | None = None
        # answers computed from the request, when no reply is queued
        self.responder: Callable[[Any], Reply] | None = None
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length)
                with outer._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    outer.seen.append(Seen(self.path, headers, json.loads(data or b"null")))
                    reply = outer.replies.pop(0) if outer.replies else outer.default
                    if reply is None and outer.responder is not None:
                        reply = outer.responder(outer.seen[-1].body)
                if reply is None:
                    reply = Reply(500, {"error": {"message": "the fake has no reply queued"}})
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.chunks is not None:
                    self._send_chunks(reply)
                    return
                body = outer.seen[-1].body
                streamed = isinstance(body, dict) and body.get("stream") is True
                if streamed and 200 <= reply.status < 300 and reply.raw is None:
                    # what the provider sends when asked to stream: the same answer as events
                    reply = Reply(reply.status, headers=reply.headers, chunks=as_stream(reply.body))
                    self._send_chunks(reply, "text/event-stream")
                    return
                payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _send_chunks(self, reply: Reply, kind: str = "application/json") -> None:
                assert reply.chunks is not None
                self.close_connection = True
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.headers.get("content-type", kind))
                    for k, v in reply.headers.items():
                        if k.lower() != "content-type":
                            self.send_header(k, v)
                    self.end_headers()
                    for chunk in reply.chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading, as it should

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}{prefix}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)


# -- OpenAI chat completions ---------------------------------------------------------


def openai_call(call_id: str, name: str, args: Any) -> dict[str, Any]:
    text = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def openai_answer(
    calls: list[dict[str, Any]] | None = None,
    text: str | None = None,
    *,
    refusal: str | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": refusal}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-fake0001",
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
        "system_fingerprint": "fp_fake",
    }


def openai_error(status: int, message: str, kind: str, code: str | None = None) -> Reply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply(status, body)


# -- Anthropic messages ---------------------------------------------------------------


def anthropic_use(call_id: str, name: str, args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def anthropic_answer(
    blocks: list[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_read: int = 0,
    cache_write: int = 0,
) -> dict[str, Any]:
    uses = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": "msg_fake0001",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": blocks,
        "stop_reason": stop_reason or ("tool_use" if uses else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
        },
    }


def anthropic_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def anthropic_error(status: int, kind: str, message: str) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": kind, "message": message}})


def calls_in(body: Mapping[str, Any]) -> Iterator[str]:
    """The tool names a request offered (either wire format)."""
    for t in body.get("tools", []):
        yield t["function"]["name"] if "function" in t else t["name"]


# -- the same answers, streamed ---------------------------------------------------------


def sse(data: Any, event: str | None = None) -> bytes:
    """One Server-Sent Event, as both providers write them."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def as_stream(answer: Any) -> Iterator[bytes]:
    """An unstreamed answer of either format as the provider streams it."""
    if isinstance(answer, dict) and answer.get("object") == "chat.completion":
        return openai_stream(answer)
    return anthropic_stream(answer)


def openai_stream(answer: dict[str, Any]) -> Iterator[bytes]:
    """``chat.completion.chunk`` events: the role, the content in pieces, each tool
    call's name then its arguments in pieces, the finish reason, the usage, [DONE]."""
    base = {k: answer[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    message = answer["choices"][0]["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse({**base, "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        for piece in pieces(message["content"]):
            yield chunk({"content": piece})
    if message.get("refusal"):
        yield chunk({"refusal": message["refusal"]})
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        named = {"name": fn["name"], "arguments": ""}
        first = {"index": i, "id": call["id"], "type": "function", "function": named}
        yield chunk({"tool_calls": [first]})
        for piece in pieces(fn["arguments"], 11):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, answer["choices"][0]["finish_reason"])
    yield sse({**base, "choices": [], "usage": answer["usage"]})
    yield b"data: [DONE]\n\n"


def anthropic_stream(answer: dict[str, Any]) -> Iterator[bytes]:
    """The messages events: message_start (input usage), each block's start, deltas
    and stop, message_delta (stop reason, output usage), message_stop; a ping too."""
    usage = answer["usage"]
    start = {**answer, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}  # fmt: skip
    yield sse({"type": "message_start", "message": start}, "message_start")
    yield sse({"type": "ping"}, "ping")
    for i, block in enumerate(answer["content"]):
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            yield sse({"type": "content_block_start", "index": i, "content_block": first},
                      "content_block_start")  # fmt: skip
            for piece in pieces(block["text"]):
                delta = {"type": "text_delta", "text": piece}
                yield sse({"type": "content_block_delta", "index": i, "delta": delta},
                          "content_block_delta")  # fmt: skip
        else:
            first = {**block, "input": {}}
            yield sse({"type": "content_block_start", "index": i, "content_block": first},
                      "content_block_start")  # fmt: skip
            for piece in pieces(json.dumps(block["input"]), 11):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield sse({"type": "content_block_delta", "index": i, "delta": delta},
                          "content_block_delta")  # fmt: skip
        yield sse({"type": "content_block_stop", "index": i}, "content_block_stop")
    delta = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
    yield sse({"type": "message_delta", "delta": delta,
               "usage": {"output_tokens": usage["output_tokens"]}}, "message_delta")  # fmt: skip
    yield sse({"type": "message_stop"}, "message_stop")


# -- OpenAI embeddings ---------------------------------------------------------------


def openai_embeddings(vectors: list[list[float]], model: str = "text-embedding-3-small") -> Reply:
    """An embeddings answer as OpenAI's ``POST /v1/embeddings`` (and Ollama's, vLLM's) gives it."""
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    usage = {"prompt_tokens": 8 * len(vectors), "total_tokens": 8 * len(vectors)}
    return Reply(200, {"object": "list", "data": data, "model": model, "usage": usage})
