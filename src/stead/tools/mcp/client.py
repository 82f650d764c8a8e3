"""A synchronous client of one MCP server, for stead's threaded code.

stead runs tools on plain threads; the MCP SDK is asyncio. An
:class:`McpClient` owns one thread running an event loop: one task there holds
the session open (the SDK's context managers must be entered and left by one
task) and each call runs as a task of its own, while the calling thread waits
for its result. Calls may come from any thread, one at a time.

A server on stdio is started by the caller's ``start`` (the runtime passes its
sandbox's :meth:`~stead.sandbox.base.Sandbox.spawn`), on the client's own
thread: bubblewrap's ``--die-with-parent`` follows the thread that started it,
so the server lives exactly as long as the client. Our own transport
(:mod:`stead.tools.mcp.transport`) knows the process, so :meth:`McpClient.close`
kills its whole group at once rather than the SDK's gentle four seconds.

Every failure is one :class:`McpServerError`, whose message says what happened
(the server could not start, exited and how, did not answer in time, sent too
much, answered off its own schema) and ends with what the server last wrote
on stderr. A server that exited, hung or flooded is killed and its client
closed: it is never asked again. A refusal or a result off schema leaves it
running.

Importing this module does not import the SDK (about 0.6 s); opening a
connection does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import shlex
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from ...errors import McpServerError
from ...extras import need

if TYPE_CHECKING:
    from mcp import ClientSession

    from ...sandbox.base import Spawned
    from .transport import Connect, HttpTransport, PipeTransport

T = TypeVar("T")

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""The longest message (a tool's result, say) read from a server, on every transport."""
MAX_NOISE_BYTES = 1024 * 1024
"""How much a server may write on stdout that is not MCP before it is stopped."""
_MAX_PAGES = 100
"""Pages of a tool listing followed before the server is taken to be looping."""
_MAX_LISTING_BYTES = 4 * 1024 * 1024
"""The most a whole tool listing may take, its pages together, as JSON: it is
journaled, and its schemas are sent to the model with every request."""
_CLOSE_WAIT = 5.0
_EXIT_WAIT = 1.0


class McpClient:
    """One connection to one MCP server, used synchronously.

    Make one with :meth:`stdio` or :meth:`http`; it is ready (initialized)
    when they return, and must be closed (it is a context manager too).
    """

    def __init__(
        self, name: str, opener: Callable[[McpClient], Connect], *, remote: bool = False
    ) -> None:
        """Use :meth:`stdio` or :meth:`http`. ``opener`` runs on the client's
        thread and returns how to connect."""
        self.name = name
        self._opener = opener
        self._remote = remote
        self._session: ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._spawned: Spawned | None = None
        self._pipes: PipeTransport | None = None
        self._http: HttpTransport | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._calls = threading.Lock()
        self._state = threading.Lock()
        self._closed = False
        self._closed_because = ""
        self._listed: frozenset[str] = frozenset()
        self._thread = threading.Thread(target=self._run, name=f"mcp {name}", daemon=True)

    # -- making one ----------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        argv: Sequence[str],
        *,
        start: Callable[[Sequence[str]], Spawned],
        name: str | None = None,
        start_timeout: float = 30.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_noise_bytes: int = MAX_NOISE_BYTES,
    ) -> McpClient:
        """Start ``argv`` with ``start`` (a sandbox's ``spawn`` with its other
        arguments bound) and initialize a session over its stdin and stdout."""
        argv = list(argv)

        def opener(client: McpClient) -> Connect:
            from .transport import PipeTransport

            spawned = client._spawned = start(argv)
            if client._closed:  # a close() that came while it was starting
                spawned.kill()
            client._pipes = PipeTransport(
                spawned, max_message_bytes=max_message_bytes, max_noise_bytes=max_noise_bytes
            )
            return client._pipes.connect

        label = name or shlex.join(argv)
        client = cls(label if len(label) <= 80 else label[:77] + "...", opener)
        client._begin(start_timeout)
        return client

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        start_timeout: float = 30.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> McpClient:
        """Connect to a server over streamable HTTP, sending ``headers`` (an
        ``Authorization``, say) with every request."""
        sent = dict(headers or {})

        def opener(client: McpClient) -> Connect:
            from .transport import HttpTransport

            client._http = HttpTransport(url, sent, max_message_bytes=max_message_bytes)
            return client._http.connect

        parts = urlsplit(url)  # named without its query, which may hold a token
        client = cls(name or f"{parts.scheme}://{parts.netloc}{parts.path}", opener, remote=True)
        client._begin(start_timeout)
        return client

    def _begin(self, start_timeout: float) -> None:
        need("mcp", "mcp", "an MCP server")
        self._thread.start()
        if not self._ready.wait(start_timeout):
            self._finish(f"did not become ready within {start_timeout:g}s")
            raise McpServerError(self._explain(self._closed_because))
        if self._session is None:
            why = self._start_failure()
            self._finish(why)
            raise McpServerError(self._explain(why)) from self._error

    def _start_failure(self) -> str:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        if (refused := self._refusal()) is not None:
            return f"was stopped before it was ready: {refused}"
        cause = _innermost(self._error) if self._error is not None else None
        # the connection closing says nothing; how the process ended does (if
        # it ended by itself: on any other failure, this side killed it)
        if cause is None or (isinstance(cause, MCPError) and cause.code == CONNECTION_CLOSED):
            ended = self._ended("before it was ready")
            if ended is not None:
                return ended
        verb = "reached" if self._remote else "started"
        return f"could not be {verb}: {cause or 'no reason given'}"

    # -- the loop's thread ---------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # cancelled by close()'s last resort
            self._error = self._error or exc
        finally:
            self._session = None
            self._ready.set()

    async def _main(self) -> None:
        from .transport import serve

        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        stop = self._stop = asyncio.Event()
        if self._closed:
            stop.set()
        try:
            await serve(self._opener(self), self._on_ready, stop)
        except Exception as exc:  # the start failed, or the session ended badly
            self._error = exc

    def _on_ready(self, session: ClientSession) -> None:
        self._session = session
        self._ready.set()

    # -- calls ---------------------------------------------------------------

    def list_tools(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Every tool the server offers, as on the wire (``name``,
        ``description``, ``inputSchema``, ``outputSchema``, ``annotations``,
        ...), following the listing's pages."""
        return self._call("the tool listing", self._all_tools, timeout)

    def call_tool(self, name: str, arguments: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Call a tool; its result as on the wire: ``content``, and
        ``structuredContent`` and ``isError`` when the server gives them. A tool
        that failed is a result with ``isError``, not an exception.

        A result is checked against the tool's ``outputSchema``. The SDK
        knows a schema only from a listing, and lists only the first page
        itself, so a tool not seen yet has every page listed first.
        """

        async def calling(session: ClientSession) -> dict[str, Any]:
            if name not in self._listed:
                await self._all_tools(session)
            return _wire(await session.call_tool(name, dict(arguments)))

        return self._call(f"the call to {name}", calling, timeout)

    async def _all_tools(self, session: ClientSession) -> list[dict[str, Any]]:
        from mcp.types import PaginatedRequestParams

        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        size = 0
        for _ in range(_MAX_PAGES):
            params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
            page = await session.list_tools(params=params)
            tools += [_wire(tool) for tool in page.tools]
            size += len(page.model_dump_json(by_alias=True, exclude_none=True))
            if size > _MAX_LISTING_BYTES:
                raise McpServerError(
                    self._explain(f"listed more than {_MAX_LISTING_BYTES // 2**20} MiB of tools")
                )
            cursor = page.next_cursor
            if cursor is None:
                self._listed = frozenset(tool["name"] for tool in tools)
                return tools
        raise McpServerError(self._explain(f"listed its tools on more than {_MAX_PAGES} pages"))

    def _call(
        self,
        what: str,
        make: Callable[[ClientSession], Coroutine[Any, Any, T]],
        timeout: float,
    ) -> T:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        with self._calls:
            session, loop = self._session, self._loop
            if self._closed or session is None or loop is None:
                raise McpServerError(self._explain(self._closed_note()))
            work = make(session)
            try:
                future = asyncio.run_coroutine_threadsafe(work, loop)
            except RuntimeError:  # its loop has just ended
                work.close()
                raise McpServerError(self._explain(self._closed_note())) from None
            try:
                return future.result(timeout)
            except concurrent.futures.TimeoutError:
                future.cancel()
                why = f"did not finish {what} within {timeout:g}s and was stopped"
                self._finish(why)
                raise McpServerError(
                    self._explain(why + " (a hung server is not used again)")
                ) from None
            except concurrent.futures.CancelledError:
                raise McpServerError(self._explain(f"was closed during {what}")) from None
            except McpServerError:
                raise
            except MCPError as exc:
                if exc.code != CONNECTION_CLOSED and self._refusal() is None:
                    raise McpServerError(
                        self._explain(f"refused {what}: {exc.message} (code {exc.code})")
                    ) from exc
                why = self._lost(what)
                self._finish(why)
                raise McpServerError(self._explain(why)) from exc
            except RuntimeError as exc:  # the SDK's verdict on a result: off its schema
                verdict = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise McpServerError(
                    self._explain(f"answered {what} with a result it cannot give: {verdict}")
                ) from exc
            except Exception as exc:  # a result that is no CallToolResult, say
                raise McpServerError(
                    self._explain(f"answered {what} with something unusable: {_innermost(exc)}")
                ) from exc

    def _lost(self, what: str) -> str:
        """Why the connection closed under ``what``."""
        if self._closed:
            return f"was closed during {what}"
        return self._ended(f"during {what}") or f"closed the connection during {what}"

    def _ended(self, when: str) -> str | None:
        """How the server's process ended (``when``), or ``None`` if it has
        not (or is remote).

        Its exit is waited for a moment: stdout reaches its end as the
        process exits, a little before the kernel reports it gone; and its
        stderr to its end, which explains it.
        """
        pipes, spawned = self._pipes, self._spawned
        if (refused := self._refusal()) is not None:
            return f"was stopped {when}: {refused}"
        if spawned is None:
            return None
        deadline = time.monotonic() + _EXIT_WAIT
        while (code := spawned.exit_code()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if pipes is not None:
            pipes.stderr_done.wait(max(deadline - time.monotonic(), 0.0))
        if code is None:
            return None
        if code < 0:
            return f"was killed by signal {-code} {when}"
        return f"exited with code {code} {when}"

    def _refusal(self) -> str | None:
        """Why this side stopped reading the server (a message too long, noise on
        stdout), if it did: the server is then not used again."""
        for transport in (self._pipes, self._http):
            if transport is not None and transport.failure is not None:
                return transport.failure
        return None

    # -- its state and its end ----------------------------------------------

    @property
    def alive(self) -> bool:
        """Whether the server can be called: the client is open and (on
        stdio) the process runs."""
        if self._closed or self._session is None:
            return False
        return self._spawned is None or self._spawned.exit_code() is None

    @property
    def pid(self) -> int | None:
        """The host pid of the server's process (its group's id), if stdio."""
        return self._spawned.pid if self._spawned is not None else None

    def stderr_tail(self, max_bytes: int = 2000) -> str:
        """The end of what the server wrote on stderr (nothing over HTTP)."""
        return self._pipes.stderr_tail(max_bytes) if self._pipes is not None else ""

    def close(self) -> None:
        """End the connection now: SIGKILL the server's process group, reap it
        and remove its cgroup; stop the client's thread. Safe to repeat, and
        from another thread while a call waits (that call then fails)."""
        with self._state:
            if self._closed:
                return
            self._closed = True
        if self._spawned is not None:
            self._spawned.kill()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            _soon(loop, stop.set)
        self._thread.join(_CLOSE_WAIT)
        if self._thread.is_alive() and loop is not None and self._task is not None:
            _soon(loop, self._task.cancel)  # the last resort: the session would not end
            self._thread.join(_CLOSE_WAIT)
        spawned = self._spawned
        if spawned is not None:
            if self._thread.is_alive():
                spawned.kill()  # its pipes are still the loop's to close
            else:
                spawned.close()

    def _finish(self, why: str) -> None:
        """Close, remembering why for later calls' messages."""
        self._closed_because = self._closed_because or why
        self.close()

    def _closed_note(self) -> str:
        return f"is closed (it {self._closed_because})" if self._closed_because else "is closed"

    def _explain(self, what: str) -> str:
        """A message: the server, what happened, and its stderr's tail."""
        text = f"MCP server {self.name!r} {what}"
        if self._pipes is None:
            return text
        tail = self.stderr_tail().strip()
        if not tail:
            return text + "; it wrote nothing on stderr"
        return f"{text}; its stderr ended with:\n{tail}"

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _wire(model: Any) -> dict[str, Any]:
    """An SDK model as its JSON on the wire (camelCase, unset fields left out)."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _innermost(exc: BaseException) -> BaseException:
    """The first exception inside exception groups (the SDK's task groups wrap
    a refused connection or a closed stream in them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop has ended already
        loop.call_soon_threadsafe(callback)
