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

            def _send_chunks(self, reply: Reply) -> None:
                assert reply.chunks is not None
                self.close_connection = True
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
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
