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

Everything here runs on the client's event loop thread (see
:mod:`stead.tools.mcp.client`); this module imports the SDK, so only the
client imports it, and only when a connection is opened.
"""

from __future__ import annotations

import asyncio
import functools
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


def http_connect(url: str, headers: Mapping[str, str], *, max_message_bytes: int) -> Connect:
    """How to open a streamable HTTP connection to ``url``, sending ``headers``
    with every request (the SDK takes headers only on its HTTP client).
    Redirects are not followed: a token is for the server it was given for."""

    @asynccontextmanager
    async def connect() -> AsyncIterator[Streams]:
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(
                headers=dict(headers), timeout=timeout, follow_redirects=False
            ) as http,
            streamable_http_client(url, http_client=http, max_sse_event_size=max_message_bytes) as (
                received,
                to_send,
            ),
        ):
            yield received, to_send

    return connect


async def serve(
    connect: Connect,
    ready: Callable[[ClientSession], None],
    stop: asyncio.Event,
) -> None:
    """Hold one session open: initialize it, hand it to ``ready``, wait for
    ``stop``. The SDK's context managers must be entered and left in one task,
    so this is that task; calls run as tasks of their own."""
    async with connect() as (received, to_send), ClientSession(received, to_send) as session:
        await session.initialize()
        ready(session)
        await stop.wait()
