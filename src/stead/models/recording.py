"""Recording a provider model's exchanges, and replaying them offline.

A recording is a JSON-lines file: a header with the model's options, then one
line per HTTP exchange (the request's JSON body, the answer's status, its
``Retry-After`` if any, and its JSON body; a streamed answer's events are kept
as the text they came in, ``{"raw": ...}``, with ``"content_type":
"text/event-stream"``). Keys never reach it: they travel in
headers, which are not recorded.

* :class:`RecordingTransport` wraps the real transport of a run started with
  ``record=PATH`` (``stead run --record PATH``) and appends each exchange,
  across activations.
* ``model: replay:PATH`` builds the recorded model with a
  :class:`ReplayTransport`, which answers the n-th request with the n-th
  recorded answer once it has checked that the request is the recorded one;
  if it is not, it stops the agent naming the first message that differs. So a
  real run becomes a regression test that needs no network: the same journal
  gives the same requests, and a change to what the model is shown fails it.

Everything the model does with the answers (parsing, retries, compaction) runs
as it did, because only the bytes on the wire are replayed. The model's key is
redacted from what is recorded, in every shape :mod:`stead.redaction` knows, as
the journal redacts it: a replayed answer then decides what the journal holds.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from .. import storefiles
from ..canonical import strict_loads
from ..errors import ModelError, SpecError
from ..redaction import Redactor
from .bounded import MAX_ANSWER_BYTES, _TooLong, kept_headers, read_bounded
from .options import ModelOptions, parse_model

FORMAT = "stead-model-recording/1"
MAX_RECORDING_BYTES = 256 * 1024 * 1024
TOO_LONG = "(an answer longer than the model's bound, refused and not recorded)"


class RecordingTransport(httpx.BaseTransport):
    """Sends through ``inner`` and appends each exchange to a recording file."""

    def __init__(
        self,
        inner: httpx.BaseTransport,
        path: Path,
        options: ModelOptions,
        secrets: Mapping[str, str] | None = None,
    ) -> None:
        storefiles.refuse_held(path, "the model recording")
        self._inner = inner
        self._path = path
        # a key the model writes into its own answer is hidden as in the journal
        self._redactor = Redactor(secrets or {})
        self._lock = threading.Lock()
        if not path.exists() or path.stat().st_size == 0:
            header = {"format": FORMAT, "model": options.to_json()}
            path.write_text(json.dumps(header, sort_keys=True) + "\n", encoding="utf-8")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        headers = kept_headers(response.headers.multi_items())
        if "text/event-stream" in response.headers.get("content-type", ""):
            # passed on as it arrives (the model shows its text while it writes),
            # recorded once it has ended
            tee = _Tee(response, lambda body: self._append(request, response, body))
            return httpx.Response(response.status_code, headers=headers, stream=tee)
        too_long = False
        try:  # read as the model reads it: never past its bound
            body = read_bounded(response.iter_bytes(), None)
        except _TooLong:
            too_long = True
            body = TOO_LONG.encode()
        finally:
            response.close()
        self._append(request, response, body)
        if too_long:  # the model is shown an answer past its bound, and refuses it
            return httpx.Response(
                response.status_code, headers=headers, content=bytes(MAX_ANSWER_BYTES + 1)
            )
        return httpx.Response(response.status_code, headers=headers, content=body)

    def _append(self, request: httpx.Request, response: httpx.Response, body: bytes) -> None:
        try:
            answer: Any = json.loads(body)
        except ValueError:
            answer = {"raw": body.decode("utf-8", "replace")}
        line = {
            "request": json.loads(request.content or b"null"),
            "status": response.status_code,
            "retry_after": response.headers.get("retry-after"),
            "answer": answer,
        }
        streamed = "text/event-stream" in response.headers.get("content-type", "")
        if streamed and body != TOO_LONG.encode():
            line["content_type"] = "text/event-stream"  # a streamed answer's events, raw
        text = json.dumps(self._redactor.value(line), sort_keys=True)
        with self._lock, self._path.open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")

    def close(self) -> None:
        self._inner.close()


def read_recording(path: Path) -> tuple[ModelOptions, list[dict[str, Any]]]:
    """The recorded model's options and its exchanges; SpecError if it is not one."""
    storefiles.refuse_held(path, "the model recording")
    try:
        if path.stat().st_size > MAX_RECORDING_BYTES:
            raise SpecError(f"recording {path} is larger than {MAX_RECORDING_BYTES} bytes")
        lines = path.read_text(encoding="utf-8").splitlines()
        header = strict_loads(lines[0]) if lines else {}
        exchanges = [strict_loads(line) for line in lines[1:] if line.strip()]
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SpecError(f"cannot read the model recording {path}: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SpecError(f"{path} is not a stead model recording (no {FORMAT} header)")
    for n, e in enumerate(exchanges, start=2):
        if not _is_exchange(e):
            raise SpecError(
                f"recording {path}, line {n}: not an exchange (a request, an HTTP status "
                "from 100 to 599, an answer, and a Retry-After that is text or null)"
            )
    return parse_model(header.get("model")), exchanges


def _is_exchange(e: Any) -> bool:
    if not isinstance(e, dict) or "request" not in e or "answer" not in e:
        return False
    status = e.get("status")
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        return False
    answer = e["answer"]
    if isinstance(answer, dict) and set(answer) == {"raw"} and not isinstance(answer["raw"], str):
        return False
    return e.get("retry_after") is None or isinstance(e["retry_after"], str)


class ReplayTransport(httpx.BaseTransport):
    """Answers each request with the recorded answer, if it is the recorded request."""

    def __init__(self, exchanges: list[dict[str, Any]], path: Path, start: int = 0) -> None:
        self._exchanges = exchanges
        self._path = path
        self.position = start

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content or b"null")
        n = self.position
        if n >= len(self._exchanges):
            raise ModelError(
                f"replay of {self._path}: the run asks the model more often than the "
                f"recording holds ({len(self._exchanges)} exchanges)"
            )
        recorded = self._exchanges[n]
        if (
            sent != recorded["request"]
            and _unstreamed(sent, recorded["request"]) != recorded["request"]
        ):
            raise ModelError(
                f"replay of {self._path}: request {n + 1} differs from the recording: "
                f"{first_difference(recorded['request'], sent)}"
            )
        self.position += 1
        streamed = recorded.get("content_type") == "text/event-stream"
        headers = {"content-type": "text/event-stream" if streamed else "application/json"}
        if recorded.get("retry_after") is not None:
            headers["retry-after"] = str(recorded["retry_after"])
        answer = recorded.get("answer")
        content = (
            answer["raw"].encode()
            if isinstance(answer, dict) and set(answer) == {"raw"}
            else json.dumps(answer).encode()
        )
        return httpx.Response(int(recorded["status"]), headers=headers, content=content)


STREAM_FIELDS = ("stream", "stream_options")
"""What a run adds to a request to have its answer streamed."""


def _unstreamed(sent: Any, recorded: Any) -> Any:
    """``sent`` as it was before answers were streamed, where the recording is of such
    a request: the same request otherwise, so its recorded (unstreamed) answer is
    served as it was and read as it always was."""
    if not isinstance(sent, dict) or not isinstance(recorded, dict):
        return sent
    if any(field in recorded for field in STREAM_FIELDS):
        return sent
    return {k: v for k, v in sent.items() if k not in STREAM_FIELDS}


def first_difference(recorded: Any, sent: Any) -> str:
    """Where two request bodies first differ, in words: the message, or the field."""
    if isinstance(recorded, dict) and isinstance(sent, dict):
        old, new = recorded.get("messages"), sent.get("messages")
        if isinstance(old, list) and isinstance(new, list):
            for i, (a, b) in enumerate(zip(old, new, strict=False)):
                if a != b:
                    role = b.get("role", "?") if isinstance(b, dict) else "?"
                    was, now = _where(a, b)
                    return f"message {i + 1} ({role}) was {was} and is now {now}"
            if len(old) != len(new):
                return f"the recording has {len(old)} messages, the run {len(new)}"
        for key in sorted(set(recorded) | set(sent)):
            if recorded.get(key) != sent.get(key):
                was, now = _short(recorded.get(key)), _short(sent.get(key))
                return f"field {key!r} was {was} and is now {now}"
    return f"the request was {_short(recorded)} and is now {_short(sent)}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 300 else text[:300] + "…"


def _where(a: Any, b: Any) -> tuple[str, str]:
    """The two texts around the first character where they differ."""
    old, new = json.dumps(a, sort_keys=True), json.dumps(b, sort_keys=True)
    at = next((i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), 0)
    start = max(0, at - 60)

    def window(text: str) -> str:
        tail = "…" if len(text) > at + 160 else ""
        return ("…" if start else "") + text[start : at + 160] + tail

    return window(old), window(new)


class _Tee(httpx.SyncByteStream):
    """A streamed answer's bytes passed on as they come, and kept (up to the model's
    bound) to be recorded when the stream is closed; one past the bound is recorded
    as :data:`TOO_LONG`."""

    def __init__(self, response: httpx.Response, done: Callable[[bytes], None]) -> None:
        self._response = response
        self._done = done
        self._kept: list[bytes] = []
        self._size = 0
        self._whole = False
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._response.iter_bytes():
            self._size += len(chunk)
            if self._size <= MAX_ANSWER_BYTES:
                self._kept.append(chunk)
            yield chunk
        self._whole = True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._response.close()
        if self._size > MAX_ANSWER_BYTES:
            self._done(TOO_LONG.encode())
        elif self._whole:
            self._done(b"".join(self._kept))
        # else cut off (its time was up): not recorded, as an unstreamed one that timed out
