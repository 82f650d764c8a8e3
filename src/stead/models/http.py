"""Asking a model service over HTTP: one request, retried as the service asks.

Both wire formats are JSON over HTTP, spoken with ``httpx`` directly (see
docs/models.md for why not the providers' SDKs): so every attempt is ours to
time, retry and journal. :func:`post_json` sends one request and:

* gives each attempt ``timeout`` seconds in all (connecting, sending, the
  answer's headers and its whole body), not per read: a service that drips its
  answer is cut off at that time (:mod:`stead.models.bounded`);
* reads the answer as it arrives, and refuses it once it passes
  :data:`~stead.models.bounded.MAX_ANSWER_BYTES`, without reading on;
* retries 429 and 5xx answers, timeouts and refused or dropped connections, up
  to ``max_retries`` times, waiting an exponential backoff with jitter (from
  the activation's seeded random generator) or what ``Retry-After`` asks, never
  longer than :data:`MAX_WAIT_SECONDS` at once;
* raises :class:`~stead.errors.ModelAuthError` for 401 and 403 (a person must
  fix the key), :class:`~stead.errors.ContextTooLong` for an answer saying the
  request does not fit the model's window, and
  :class:`~stead.errors.ModelError` for anything else it cannot use, with the
  start of the service's own words;
* records every attempt (:class:`Attempt`: status, latency, error), which the
  runtime journals with the decision, or with the failure.

So one model call takes at most ``(max_retries + 1) * timeout`` plus the waits
between attempts (each at most :data:`MAX_WAIT_SECONDS`): with the defaults
(120 s, 4 retries) about 14 minutes, after which the agent stops in
``needs_attention`` and gives its lease back.

Nothing here journals or keeps anything between calls: a model is stateless.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import urllib.request
import weakref
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import urlsplit

import httpx

from ..canonical import strict_loads
from ..errors import ContextTooLong, ModelAuthError, ModelError
from .bounded import MAX_ANSWER_BYTES, _TooLong, deadline, kept_headers, read_bounded

if TYPE_CHECKING:
    import aiohttp  # imported by the parked worker, which alone asks on an event loop

MAX_WAIT_SECONDS = 60.0
_RETRIED = {408, 409, 425, 429, 500, 502, 503, 504, 529}
_TOO_LONG = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One request to a model service: how it went and how long it took."""

    status: int | None
    latency_ms: float
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "latency_ms": round(self.latency_ms, 1)}
        if self.error:
            out["error"] = self.error
        return out


@dataclass(slots=True)
class Exchange:
    """What one :func:`post_json` did: the attempts, and the answer's JSON."""

    attempts: list[Attempt] = field(default_factory=list)
    body: Any = None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _words(response: httpx.Response) -> str:
    """The start of what the service said, for a person (never the request: no key)."""
    text = response.text[:400].strip()
    return " ".join(text.split()) or f"HTTP {response.status_code}"


def _too_long(response: httpx.Response) -> bool:
    if response.status_code not in (400, 413, 422):
        return False
    lowered = response.text[:4000].lower()
    return any(marker in lowered for marker in _TOO_LONG)


Send = tuple[Literal["send"], None]
Sleep = tuple[Literal["sleep"], float]
Sent = httpx.Response | httpx.TransportError | _TooLong


Read = Callable[[httpx.Response, str], Any]
"""How a 2xx answer's body becomes the answer's JSON (by default: it is JSON)."""

Watch = Callable[[int, str], Callable[[bytes], None] | None]
"""Called as each attempt's answer begins, with its status and content type: what
its chunks are given to as they arrive, or None."""


def _exchange(
    service: str, max_retries: int, rng: random.Random, read: Read | None = None
) -> Generator[Send | Sleep, Sent | None, Exchange]:
    """The retry loop of one request, without I/O: it yields ``("send", None)`` and
    is sent the response (or the transport's error), or yields ``("sleep", s)``;
    :func:`post_json` drives it with threads' I/O, :func:`apost_json` with asyncio's."""
    exchange = Exchange()
    for attempt in range(max_retries + 1):
        started = time.perf_counter()
        wait: float | None = None
        response = yield ("send", None)
        if isinstance(response, _TooLong):
            exchange.attempts.append(Attempt(response.status, _ms(started), "answer too long"))
            raise ModelError(
                f"{service} sent an answer longer than {MAX_ANSWER_BYTES // 2**20} MiB; it was "
                "refused before the rest was read (no model's answer is that long: check that "
                "the spec's base_url is a model service, then `stead resume` the agent)",
                attempts=exchange.attempts,
            )
        if isinstance(response, httpx.TimeoutException):
            exchange.attempts.append(Attempt(None, _ms(started), "timed out"))
        elif isinstance(response, httpx.TransportError):
            exchange.attempts.append(Attempt(None, _ms(started), f"connection failed: {response}"))
        elif response is not None:
            took = _ms(started)
            status = response.status_code
            if 200 <= status < 300:
                exchange.attempts.append(Attempt(status, took))
                exchange.body = (read or _json)(response, service)
                return exchange
            words = _words(response)
            exchange.attempts.append(Attempt(status, took, words[:200]))
            if status in (401, 403):
                raise ModelAuthError(
                    f"{service} refused the API key (HTTP {status}: {words}); put a valid key "
                    "in the vault (`stead secret set`) or the worker's environment, then "
                    "`stead resume` the agent",
                    attempts=exchange.attempts,
                )
            if _too_long(response):
                raise ContextTooLong(
                    f"{service} says the request is longer than the model's window: {words}",
                    attempts=exchange.attempts,
                )
            if status not in _RETRIED:
                raise ModelError(
                    f"{service} answered HTTP {status}: {words}", attempts=exchange.attempts
                )
            wait = _retry_after(response)
        if attempt == max_retries:
            break
        if wait is None:
            wait = min(MAX_WAIT_SECONDS, 0.5 * 2**attempt) * (0.5 + rng.random() / 2)
        yield ("sleep", min(wait, MAX_WAIT_SECONDS))
    last = exchange.attempts[-1]
    raise ModelError(
        f"{service} gave no answer after {len(exchange.attempts)} attempts (last: "
        f"{'HTTP ' + str(last.status) if last.status else last.error}); it is retried "
        "when the agent is resumed",
        attempts=exchange.attempts,
    )


def post_json(
    client: httpx.Client,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any] | bytes,
    *,
    service: str,
    max_retries: int,
    rng: random.Random,
    timeout: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    read: Read | None = None,
    watch: Watch | None = None,
) -> Exchange:
    """POST ``body`` as JSON (or as the JSON bytes it already is) and return the
    answer's JSON, retrying as described above.
    Each attempt ends within ``timeout`` seconds in all on a client from
    :func:`~stead.models.bounded.bounded_client`; on another transport (a test's, a
    replay) the time is checked as the answer's bytes come."""
    payload = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    sending = {**headers, "content-type": "application/json"}
    loop = _exchange(service, max_retries, rng, read)
    answer: Sent | None = None
    try:
        while True:
            what, seconds = loop.send(answer)
            answer = None
            if what == "sleep":
                sleep(seconds or 0.0)
                continue
            answer = _send(client, url, sending, payload, timeout, watch)
    except StopIteration as done:
        return cast(Exchange, done.value)


def _send(
    client: httpx.Client,
    url: str,
    headers: Mapping[str, str],
    payload: bytes,
    timeout: float | None,
    watch: Watch | None = None,
) -> Sent:
    """One attempt on a thread: its answer read as it arrives, within its bounds."""
    at = None if timeout is None else time.monotonic() + timeout
    try:
        with (
            deadline(at),
            client.stream("POST", url, headers=headers, content=payload) as got,
        ):
            feed = watch(got.status_code, got.headers.get("content-type", "")) if watch else None
            try:
                content = read_bounded(got.iter_bytes(), at, feed)
            except _TooLong:
                return _TooLong(got.status_code)
            return httpx.Response(
                got.status_code, headers=kept_headers(got.headers.multi_items()), content=content
            )
    except httpx.TransportError as exc:
        return exc
    except httpx.DecodingError as exc:  # a body its content-encoding does not fit
        return httpx.RemoteProtocolError(f"an answer that cannot be decoded: {exc}")


async def apost_json(
    session: aiohttp.ClientSession,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any] | bytes,
    *,
    service: str,
    max_retries: int,
    rng: random.Random,
    timeout: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    read: Read | None = None,
    watch: Watch | None = None,
) -> Exchange:
    """:func:`post_json` on an event loop: the request waits without a thread. The
    session is shared by many models, so each request brings its own ``timeout``.
    aiohttp, not httpx, because a worker keeps thousands of these in flight on one
    thread, and httpx's asyncio client spends ten times the processor time on each
    (docs/scaling.md); its answer is read into an ``httpx.Response``, bounded, for
    the one retry loop both share. aiohttp's ``total`` timeout bounds the whole
    attempt, its body included."""
    import aiohttp

    payload = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    sending = {**headers, "content-type": "application/json"}
    limits = aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 10.0))
    loop = _exchange(service, max_retries, rng, read)
    answer: Sent | None = None
    try:
        while True:
            what, seconds = loop.send(answer)
            answer = None
            if what == "sleep":
                await sleep(seconds or 0.0)
                continue
            try:
                async with session.post(
                    url,
                    data=payload,
                    headers=sending,
                    timeout=limits,
                    allow_redirects=False,
                    proxy=proxy_for(session, url),
                ) as got:
                    kind = got.headers.get("content-type", "")
                    try:
                        content = await _bounded(
                            got.content, watch(got.status, kind) if watch else None
                        )
                    except _TooLong:
                        answer = _TooLong(got.status)
                    else:
                        # aiohttp has decoded the body: its content-encoding goes
                        kept = kept_headers((k, v) for k, v in got.headers.items())
                        answer = httpx.Response(got.status, headers=kept, content=content)
            except TimeoutError:
                answer = httpx.ReadTimeout("timed out")
            except aiohttp.ClientError as exc:
                answer = httpx.ConnectError(str(exc) or type(exc).__name__)
    except StopIteration as done:
        return cast(Exchange, done.value)


_PROXIES: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def read_proxies(session: aiohttp.ClientSession) -> None:
    """Read the environment's proxies (``HTTPS_PROXY``, ``NO_PROXY``...) once for
    ``session``, as httpx reads them once for a client: a session made with
    ``trust_env`` would look them up, and ``~/.netrc``, on a thread at every request."""
    _PROXIES[session] = urllib.request.getproxies_environment()


def proxy_for(session: aiohttp.ClientSession, url: str) -> str | None:
    """The proxy a request of ``session`` to ``url`` goes through, if any."""
    proxies = _PROXIES.get(session)
    if not proxies:
        return None
    parts = urlsplit(url)
    # NO_PROXY, as urllib and httpx read it (the function is not in the type stubs)
    if urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):  # type: ignore[attr-defined]
        return None
    return proxies.get(parts.scheme)


async def _bounded(
    stream: aiohttp.StreamReader, feed: Callable[[bytes], None] | None = None
) -> bytes:
    """An answer's bytes as they arrive; :class:`_TooLong` once they pass
    :data:`MAX_ANSWER_BYTES`, before the rest is read."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.readany():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise _TooLong(None)
        chunks.append(chunk)
        if feed is not None:
            feed(chunk)
    return b"".join(chunks)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1e3


def _json(response: httpx.Response, service: str) -> Any:
    try:
        return strict_loads(response.content)
    except (ValueError, RecursionError):
        raise ModelError(
            f"{service} answered with something that is not JSON (or holds a number that "
            f"is not finite): {_words(response)[:200]}"
        ) from None
