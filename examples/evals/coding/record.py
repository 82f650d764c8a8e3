"""Make coding.recording.jsonl again: the coding agent, run against a model server.

    python examples/evals/coding/record.py [--base-url URL]

Without ``--base-url`` the answers come from a small server started here on
127.0.0.1 that speaks OpenAI's chat-completions format and answers as a careful
model would (list, read, run the tests, fix, run them again, mark its goal, finish). With
``--base-url`` (and ``OPENAI_API_KEY`` set) a real provider answers, and the
recording holds what it said. Either way the agent, its tools and its journal
are the real ones: ``stead run --record`` writes every exchange.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXED = (HERE / "project" / "calc.py").read_text(encoding="utf-8").replace("a - b", "a + b")
PLAN: list[tuple[str, dict[str, Any]]] = [
    ("list_files", {}),
    ("read_file", {"path": "calc.py"}),
    ("shell", {"command": "python3 test_calc.py"}),
    ("write_file", {"path": "calc.py", "content": FIXED}),
    ("shell", {"command": "python3 test_calc.py"}),
    ("complete_goal", {"id": "green"}),
    ("finish", {"summary": "add() subtracted; it now adds, and the tests pass"}),
]


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The next call of the plan, after as many tool results as the request holds."""
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    name, args = PLAN[min(done, len(PLAN) - 1)]
    call = {
        "id": f"call_{done}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return {
        "id": f"chatcmpl-{done}",
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
        "usage": {
            "prompt_tokens": 400 + 150 * done,
            "completion_tokens": 40,
            "total_tokens": 440 + 150 * done,
        },
    }


class _Model(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        payload = json.dumps(answer(body)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", help="a real provider's endpoint (default: the server here)")
    p.add_argument("--name", default="gpt-4o-mini", help="the model's name")
    args = p.parse_args()
    server = None
    url = args.base_url
    if url is None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}/v1"
        os.environ.setdefault("OPENAI_API_KEY", "sk-recording-only")
        os.environ.setdefault("STEAD_MODEL_KEY_ENV", "OPENAI_API_KEY")  # sent to this server
    spec = (
        (HERE / "agent.yaml")
        .read_text(encoding="utf-8")
        .replace(
            "model: replay:coding.recording.jsonl",
            f"model: {{provider: openai, name: {args.name}, base_url: '{url}'}}",
        )
    )
    recording = HERE / "coding.recording.jsonl"
    recording.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        live = HERE / ".record-agent.yaml"  # beside agent.yaml: the same workspace folder
        live.write_text(spec, encoding="utf-8")
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "stead",
                    "run",
                    str(live),
                    "--record",
                    str(recording),
                    "--store",
                    f"sqlite:///{tmp}/stead.db",
                    "--data-dir",
                    tmp,
                ],
                check=False,
            )
        finally:
            live.unlink()
    if server is not None:
        server.shutdown()
    print(f"wrote {recording}" if done.returncode == 0 else "the run did not complete")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
