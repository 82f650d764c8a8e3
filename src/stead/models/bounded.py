"""Reading a model service's answer within its bounds: its size, and its time.

A service may send an answer without end, or one byte every second. Neither
may cost the worker more than :data:`MAX_ANSWER_BYTES` of memory or the
request more than its ``timeout``:

* :func:`read_bounded` reads an answer's body as it arrives, counting, and
  stops one chunk past the limit (the answer is then refused whole, never
  parsed), or at the request's deadline;
* :func:`bounded_client` is the threaded client: every read, write and
  handshake on its connections (a proxy's from the environment included)
  waits at most until the deadline of the request this thread is sending
  (:func:`deadline`), so a service that drips its status line or headers is
  cut off at the deadline too, not only one that drips its body. httpx offers
  no deadline per request (its timeouts are per read), hence this wrapper of
  httpcore's own network backend.

The event-loop client (aiohttp) has a total timeout of its own per request and
reads its body through :func:`stead.models.http.apost_json`'s counted loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""A model service's answer larger than this is refused, not parsed; it is not
even read past this (and one chunk)."""

_local = threading.local()


@contextmanager
def deadline(at: float | None) -> Iterator[None]:
    """Bound every read and write of this thread's requests on a
    :func:`bounded_transport` by ``at`` (``time.monotonic()``); ``None`` leaves
    them to their own timeouts."""
    before = getattr(_local, "deadline", None)
    _local.deadline = at
    try:
        yield
    finally:
        _local.deadline = before


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout``, shortened to what is left until this thread's deadline."""
    at: float | None = getattr(_local, "deadline", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the request's time is up")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A connection whose every wait ends at the deadline of the request using it."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        wait = _clamp(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, wait))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's backend, its connections wrapped in :class:`_Stream`."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _clamp(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, wait, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        wait = _clamp(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, wait, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bounded_transport() -> httpx.HTTPTransport:
    """httpx's own transport (certificates checked, HTTP/1.1), its connections held
    to the deadline of :func:`deadline`."""
    made = httpx.HTTPTransport()
    _hold(made)
    return made


def bounded_client(timeout: httpx.Timeout) -> httpx.Client:
    """A client whose connections are held to the deadline of :func:`deadline`,
    the proxies it takes from the environment (``HTTPS_PROXY``...) included."""
    # no transport given, else httpx would not take proxies from the environment
    client = httpx.Client(timeout=timeout, follow_redirects=False)
    for transport in (client._transport, *client._mounts.values()):
        _hold(transport)
    return client


def _hold(transport: httpx.BaseTransport | None) -> None:
    """Hold ``transport``'s connections to the deadline: httpx takes no network
    backend, so it is put into the transport's connection pool (a proxy's too)."""
    if isinstance(transport, httpx.HTTPTransport):
        pool = transport._pool
        if isinstance(pool, httpcore.ConnectionPool) and not isinstance(
            pool._network_backend, _Backend
        ):
            pool._network_backend = _Backend(pool._network_backend)


class _TooLong(Exception):
    """An answer passed :data:`MAX_ANSWER_BYTES` while it was read; ``status`` is
    its HTTP status, once known."""

    def __init__(self, status: int | None = None) -> None:
        super().__init__(status)
        self.status = status


def read_bounded(
    chunks: Iterable[bytes], at: float | None, feed: Callable[[bytes], None] | None = None
) -> bytes:
    """The body ``chunks`` give, read until its end; :class:`_TooLong` past
    :data:`MAX_ANSWER_BYTES`, and ``httpx.ReadTimeout`` once ``at`` has passed
    (for transports not held to the deadline themselves, checked as bytes come).
    Each chunk within the bounds is also given to ``feed`` as it comes (a streamed
    answer's text, shown while it is written)."""
    kept: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise _TooLong()
        kept.append(chunk)
        if feed is not None:
            feed(chunk)
        if at is not None and time.monotonic() > at:
            raise httpx.ReadTimeout("the request's time is up")
    return b"".join(kept)


_RESENT = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def kept_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """An answer's headers for a response rebuilt from its decoded body: without
    those that describe the body as it was sent (else it would be decoded twice)."""
    return [(k, v) for k, v in headers if k.lower() not in _RESENT]
