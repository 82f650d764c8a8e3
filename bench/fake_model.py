"""A zero-latency model service of the OpenAI wire format on 127.0.0.1, for benchmarks.

It answers each request with the bench agent's next decision (``lookup`` and
``remember``, see :mod:`bench.workload`) as tool calls, choosing it by how many
decisions the conversation it is sent already holds, as stateless as a real
model; a request offering no tools (a compaction's summary) gets a short text.
What is measured is the runtime's own cost of a model over HTTP: rendering the
conversation, the request, the answer's parsing and checking, not a model.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.workload import decision_data

LATENCY = float(os.environ.get("BENCH_MODEL_LATENCY", "0"))
"""Seconds the service waits before each answer (``BENCH_MODEL_LATENCY``; 0 by default)."""

_SIZES: list[int] = []
"""The body's bytes of every request offering tools since the last ``GET /stats``."""
_SIZES_LOCK = threading.Lock()


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if "tools" not in body:
        message["content"] = "Looked up items and remembered the last key."
    else:
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        tool, remember = decision_data(n)["actions"]
        message["tool_calls"] = [
            {"id": f"c{n}a", "type": "function",
             "function": {"name": "lookup", "arguments": json.dumps(tool["args"])}},
            {"id": f"c{n}b", "type": "function",
             "function": {"name": "remember",
                          "arguments": json.dumps({"values": remember["remember"]})}},
        ]  # fmt: skip
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "bench"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 30, "total_tokens": 1030},
    }


class _Handler(BaseHTTPRequestHandler):
    # keep-alive, as a model service keeps its connections: a connection per request
    # would add a TCP handshake and a new client connection to every step measured
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, payload: bytes) -> None:
        # one write: headers and body sent apart wait on the client's delayed ACK
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(payload)}\r\n\r\n".encode()
            + payload
        )

    def do_GET(self) -> None:
        """``GET /stats``: the request sizes (bytes) since the last call, which it clears;
        how the step-cost curve learns how long the conversation it sent was."""
        with _SIZES_LOCK:
            payload = json.dumps({"request_bytes": _SIZES}).encode()
            _SIZES.clear()
        self._reply(payload)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["content-length"]))
        body = json.loads(raw)
        if "tools" in body:
            with _SIZES_LOCK:
                _SIZES.append(len(raw))
        time.sleep(LATENCY)  # a real model thinks before it answers
        self._reply(json.dumps(_answer(body)).encode())


class FakeModelServer:
    """``with FakeModelServer() as url:`` a base URL for ``provider: openai``.

    The server runs in a process of its own, so its work (reading each request)
    is not counted as the runtime's: as with a real model service.
    """

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency

    def __enter__(self) -> str:
        env = {**os.environ, "BENCH_MODEL_LATENCY": str(self.latency)}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.fake_model"],
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        port = int(self._proc.stdout.readline())
        return f"http://127.0.0.1:{port}/v1"

    def __exit__(self, *exc: Any) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


class _Server(ThreadingHTTPServer):
    # thousands of agents send their requests at once: the default backlog of 5
    # would drop connections and make clients retry after a second
    request_queue_size = 4096
    daemon_threads = True


def serve() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # a thread per request waiting out the latency: small stacks keep 10,000 of them cheap
    threading.stack_size(256 * 1024)
    server = _Server(("127.0.0.1", 0), _Handler)
    print(server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve()
