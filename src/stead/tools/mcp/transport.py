"""The asynchronous side of an MCP connection: the SDK's session over our pipes.

The SDK's own stdio transport starts the server itself, so it never says which
process it started, merges the worker's environment into the server's, and
ends a server gently (close its input, wait, SIGTERM, wait, SIGKILL: up to
four seconds for a hung one). stead starts servers through its sandbox
(:meth:`stead.sandbox.base.Sandbox.spawn`) and must be able to kill one at
once, so :class:`PipeTransport` speaks newline-delimited JSON-RPC over the
pipes of a process it is handed. It also bounds what a server can make the
worker hold: one message may be at most ``max_message_bytes`` long, and lines
on stdout that are not MCP messages may add up to ``max_noise_bytes``; past
either, the server is killed and :attr:`PipeTransport.failure` says why.
:class:`HttpTransport` holds a remote server's answers to the same bound.

Everything here runs on the client's event loop thread (see
:mod:`stead.tools.mcp.client`); this module imports the SDK, so only the
client imports it, and only when a connection is opened.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from ...sandbox.base import Spawned

_CHUNK = 64 * 1024
STDERR_KEPT = 64 * 1024
"""The most of a server's stderr kept (its end) for error messages."""
_STDERR_GRACE = 1.0

# the stream pair a ClientSession is built over (the SDK's own names for its
# stream protocols are private, so they are not spelled out here)
Streams = tuple[Any, Any]
Connect = Callable[[], AbstractAsyncContextManager[Streams]]


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


class PipeTransport:
    """MCP over a spawned process's stdin and stdout, its stderr kept aside."""

    def __init__(self, spawned: Spawned, *, max_message_bytes: int, max_noise_bytes: int) -> None:
        self.spawned = spawned
        self.max_message_bytes = max_message_bytes
        self.max_noise_bytes = max_noise_bytes
        self.failure: str | None = None
        """Why this side ended the connection (a message too long, noise), if it did."""
        self.stderr_done = threading.Event()
        self._noise = 0
        self._first_noise = b""
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()

    def stderr_tail(self, max_bytes: int) -> str:
        """The last ``max_bytes`` the server wrote on stderr, decoded."""
        with self._stderr_lock:
            tail = bytes(self._stderr[-max_bytes:]) if max_bytes > 0 else b""
        return tail.decode("utf-8", errors="replace")

    def _fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
        self.spawned.kill()

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Streams]:
        """The stream pair a :class:`ClientSession` speaks over; on exit the
        process group is killed and the pipes closed."""
        proc = self.spawned.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        loop = asyncio.get_running_loop()
        out, err = asyncio.StreamReader(limit=_CHUNK), asyncio.StreamReader(limit=_CHUNK)
        transports: list[asyncio.BaseTransport] = []
        try:
            for reader, pipe in ((out, proc.stdout), (err, proc.stderr)):
                made, _ = await loop.connect_read_pipe(
                    functools.partial(asyncio.StreamReaderProtocol, reader), pipe
                )
                transports.append(made)
            stdin, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, proc.stdin
            )
            transports.append(stdin)
            writer = asyncio.StreamWriter(stdin, protocol, None, loop)
            incoming, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            to_send, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
            stderr_ended = anyio.Event()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._read, out, incoming)
                tasks.start_soon(self._write, outgoing, writer)
                tasks.start_soon(self._keep_stderr, err, stderr_ended)
                try:
                    yield received, to_send
                finally:
                    self.spawned.kill()
                    # what a dying server said last is what explains it: let
                    # stderr reach its end (it does as the group dies) first
                    with anyio.move_on_after(_STDERR_GRACE):
                        await stderr_ended.wait()
                    tasks.cancel_scope.cancel()
                    for stream in (incoming, received, to_send, outgoing):
                        stream.close()
        finally:
            self.spawned.kill()
            for each in transports:
                each.close()

    async def _read(
        self, out: asyncio.StreamReader, sink: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        """Split stdout into lines and pass them on; closing ``sink`` at the
        end (the session sees the connection close) at end of file, when the
        session is gone, or at the first limit passed."""
        pending = bytearray()
        async with sink:
            while chunk := await out.read(_CHUNK):
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    line = bytes(pending[:end])
                    del pending[: end + 1]
                    if not await self._deliver(line, sink):
                        return
                if len(pending) > self.max_message_bytes:
                    self._fail(f"it sent a message longer than {_mib(self.max_message_bytes)}")
                    return

    async def _deliver(
        self, line: bytes, sink: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> bool:
        """Hand one line to the session if it is an MCP message, else count it
        as noise; ``False`` once reading must stop."""
        if len(line) > self.max_message_bytes:
            self._fail(f"it sent a message longer than {_mib(self.max_message_bytes)}")
            return False
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:  # not JSON, or JSON that is no JSON-RPC message
            self._noise += len(line) + 1
            self._first_noise = self._first_noise or line[:100] or b"(empty)"
            if self._noise <= self.max_noise_bytes:
                return True
            sample = self._first_noise.decode("utf-8", errors="replace")
            self._fail(
                f"it wrote more than {_mib(self.max_noise_bytes)} on stdout that is not MCP "
                f"(the first such line began {sample!r})"
            )
            return False
        try:
            await sink.send(SessionMessage(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False  # the session is gone
        return True

    async def _write(
        self, source: MemoryObjectReceiveStream[SessionMessage], writer: asyncio.StreamWriter
    ) -> None:
        async with source:
            async for item in source:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    writer.write(data.encode() + b"\n")
                    await writer.drain()
                except (ConnectionError, OSError):
                    # a server that no longer reads its input can answer nothing more
                    self._fail("it stopped reading its input")
                    return

    async def _keep_stderr(self, err: asyncio.StreamReader, ended: anyio.Event) -> None:
        """Read stderr to its end (a full pipe would stall the server), keeping
        only its last :data:`STDERR_KEPT` bytes."""
        try:
            while chunk := await err.read(_CHUNK):
                with self._stderr_lock:
                    self._stderr += chunk
                    del self._stderr[:-STDERR_KEPT]
        finally:
            self.stderr_done.set()
            ended.set()


class HttpTransport:
    """MCP over streamable HTTP, every answer held to ``max_message_bytes``.

    A server may answer a request with one plain JSON body, which the SDK reads
    whole before any check, or with server-sent events, each of which the SDK
    bounds (``max_sse_event_size``) but then takes for a closed connection. So
    the HTTP client the SDK is given counts the bytes of each plain body, and of
    each event, as they arrive and, past the bound, stops reading, records why
    (:attr:`failure`) and makes the SDK's read fail; the client then ends the
    connection and says why. Answers are asked for unencoded: a
    compressed answer would be bounded only before its expansion, so one is
    refused.
    """

    def __init__(self, url: str, headers: Mapping[str, str], *, max_message_bytes: int) -> None:
        self.url = url
        # the SDK takes headers only on its HTTP client, sent with every request
        self.headers = {**headers, "accept-encoding": "identity"}
        self.max_message_bytes = max_message_bytes
        self.failure: str | None = None
        """Why this side ended the connection (an answer too long), if it did."""

    def _fail(self, why: str) -> _MessageRefused:
        if self.failure is None:
            self.failure = why
        return _MessageRefused(why)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Streams]:
        """The stream pair a :class:`ClientSession` speaks over. Redirects are
        not followed: a token is for the server it was given for."""
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(
                headers=self.headers,
                timeout=timeout,
                follow_redirects=False,
                transport=_Bounded(self),
            ) as http,
            streamable_http_client(
                self.url, http_client=http, max_sse_event_size=self.max_message_bytes
            ) as (received, to_send),
        ):
            yield received, to_send


class _MessageRefused(httpx2.StreamError):
    """An answer this side stopped reading; the SDK turns it into an error for
    the request it answered (it catches ``StreamError`` there)."""


class _Quiet(logging.Filter):
    """Drops the SDK's traceback for an answer this side refused: the client's
    error says what happened, and `stead mcp ls` is not to print a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _MessageRefused))


logging.getLogger("mcp.client.streamable_http").addFilter(_Quiet())


class _Bounded(httpx2.AsyncBaseTransport):
    """httpx's transport, each answer's body counted as it arrives."""

    def __init__(self, owner: HttpTransport) -> None:
        self._owner = owner
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise self._owner._fail(
                f"it answered in the {encoding!r} encoding, though asked for none "
                "(a compressed answer cannot be bounded before it is expanded)"
            )
        events = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Counted(response.stream, self._owner, events=events),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


_EVENT_ENDS = (b"\r\n\r\n", b"\n\n", b"\r\r")
"""The blank lines that end a server-sent event."""


class _Counted(httpx2.AsyncByteStream):
    """A body that fails once it (or, in a stream of events, the event arriving)
    passes the message bound, before the rest is read."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, owner: HttpTransport, *, events: bool
    ) -> None:
        self._inner = inner
        self._owner = owner
        self._events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        tail = b""  # the end of the last chunk, for a blank line split between two
        async for chunk in self._inner:
            size += len(chunk)
            if self._events:
                seen = tail + chunk
                ends = [at + len(end) for end in _EVENT_ENDS if (at := seen.rfind(end)) >= 0]
                if ends:  # what arrived after the last event's end is the next one's
                    size = len(seen) - max(ends)
                tail = seen[-3:]
            if size > self._owner.max_message_bytes:
                await self._inner.aclose()
                limit = _mib(self._owner.max_message_bytes)
                raise self._owner._fail(f"it sent a message longer than {limit}")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


async def serve(
    connect: Connect,
    ready: Callable[[ClientSession], None],
    stop: asyncio.Event,
) -> None:
    """Hold one session open: initialize it, hand it to ``ready``, wait for
    ``stop``. The SDK's context managers must be entered and left in one task,
    so this is that task; calls run as tasks of their own."""
    async with (
        connect() as (received, to_send),
        ClientSession(received, to_send) as session,
        anyio.create_task_group() as tasks,
    ):
        # a close() while the server is still answering `initialize` ends it
        # at once, not after the client's wait for this task to end
        async def stopped() -> None:
            await stop.wait()
            tasks.cancel_scope.cancel()

        tasks.start_soon(stopped)
        await session.initialize()
        ready(session)
