"""A webhook receiver of our own on 127.0.0.1, scripted per request, and a signature
check written here from the Standard Webhooks spec (not with stead's own code)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Answers each request with the next of ``script``: an HTTP status, ``"slow"`` (an
    answer after ``slow`` seconds), ``"hang"`` (none until :attr:`release` is set), or
    ``"redirect"``; past the script's end, 200."""

    script: list[object]
    slow: float = 2.0
    got: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


@contextmanager
def receiver(script: list[object], slow: float = 2.0) -> Iterator[Receiver]:
    box = Receiver(list(script), slow)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            with lock:
                box.got.append(Received(self.path, {k.lower(): v for k, v in
                                                    self.headers.items()}, body))  # fmt: skip
                step = box.script.pop(0) if box.script else 200
            box.arrived.set()
            if step == "slow":
                time.sleep(box.slow)
                step = 200
            elif step == "hang":
                box.release.wait(30)
                return
            elif step == "redirect":
                self.send_response(302)
                self.send_header("location", "http://127.0.0.1:1/elsewhere")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            assert isinstance(step, int)
            with_body = b"ok" if step < 300 else b"no"
            try:
                self.send_response(step)
                self.send_header("content-length", str(len(with_body)))
                self.end_headers()
                self.wfile.write(with_body)
            except OSError:
                pass  # the deliverer gave up waiting and closed

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box
    finally:
        box.release.set()
        server.shutdown()
        server.server_close()


def verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """Whether ``headers`` carry a valid v1 signature of ``body`` under ``secret``."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(s, expected) for s in headers["webhook-signature"].split(" "))
