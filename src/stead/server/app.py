"""``stead serve``'s application: every request authenticated, then answered as its
token's tenant.

The API is a list of :class:`Endpoint` declarations (:mod:`stead.server.api`):
each names its method and path, the least role it needs
(:data:`stead.server.auth.ACTIONS`), the JSON schema of its body and of its
answer, and a handler. The routes and the OpenAPI document
(:mod:`stead.server.openapi`) are both made from that list, so they cannot
disagree, and every body is checked against its schema before a handler sees
it.

A request's tenant is its token's: its handler gets a
:class:`~stead.runtime.runtime.Runtime` whose store is that tenant's view
(:class:`~stead.store.scoped.TenantStore`), so another tenant's agent is not
found rather than refused, and whose ``person`` is the token's name, so an
approval records who gave it. Handlers are plain functions, which Starlette
runs on its thread pool: the runtime's calls block on the store.

Before a handler runs, its token is checked (:func:`check_token`: a client's
failures held off, a valid token never), an id in its path is checked for
control characters, and its body is read with a bound and a deadline
(:mod:`stead.server.bodies`). Every answer carries :data:`SECURITY_HEADERS`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jsonschema
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..clock import Clock, SystemClock
from ..errors import SteadError, UsageError
from ..runtime.runtime import Runtime
from ..store.base import Store
from ..store.scoped import TenantStore
from ..store.tokens import TokenRecord, TokenRows
from . import auth, bodies
from .errors import from_error, problem
from .running import ServerWorkers
from .schemas import odd_path_part

SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
"""Sent with every answer: nothing framed, sniffed or referred. The page's own
answers widen the policy to what they use (:mod:`stead.server.web`)."""


@dataclass(frozen=True, slots=True)
class Call:
    """What a handler is given: the tenant's runtime, the token, and the request's
    path parameters, query and (checked) body."""

    rt: Runtime
    token: TokenRecord
    params: Mapping[str, str]
    query: Mapping[str, str]
    body: Any
    server: Server
    headers: Mapping[str, str] = field(default_factory=dict)
    alive: Callable[[], bool] = lambda: True
    """Whether the credential the request came with still holds (for a stream, which
    outlives its request's check)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One route of the API, as the router and the OpenAPI document see it."""

    method: str
    path: str
    action: str
    summary: str
    handler: Callable[[Call], Any]
    answer: Mapping[str, Any]
    body: Mapping[str, Any] | None = None
    status: int = 200
    query: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tag: str = "agents"
    media: str = "application/json"
    raw: bool = False
    """The body is bytes (an archive), not JSON; ``body`` then describes its media."""


class SessionFinder(Protocol):
    def find(self, sid: str) -> tuple[Any, TokenRecord] | None: ...


class _Turn:
    """A lock that a weak mapping can hold (a bare lock cannot be weakly referenced)."""

    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


class Counts:
    """Things held open per key (a token's streams), each key up to a limit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def take(self, key: str, limit: int) -> bool:
        with self._lock:
            if self._held.get(key, 0) >= limit:
                return False
            self._held[key] = self._held.get(key, 0) + 1
            return True

    def give_back(self, key: str) -> None:
        with self._lock:
            left = self._held.get(key, 0) - 1
            if left > 0:
                self._held[key] = left
            else:
                self._held.pop(key, None)


class Server:
    """The store, the data folder and the pieces every request shares."""

    def __init__(
        self,
        store: Store,
        data_dir: str | Path,
        *,
        blobs: str | None = None,
        specs: Path | None = None,
        clock: Clock | None = None,
        secret_key: bytes | None = None,
        attempts: auth.Attempts | None = None,
    ) -> None:
        inner = store.inner if isinstance(store, TenantStore) else store
        if not isinstance(inner, TokenRows):
            raise TypeError(f"{type(inner).__name__} keeps no API tokens")
        self.store = inner
        self.tokens: TokenRows = inner
        self.data_dir = Path(data_dir)
        self.blobs = blobs
        self.specs = specs
        self.clock = clock or SystemClock()
        self.secret_key = secret_key
        self.attempts = attempts or auth.Attempts(self.clock)
        self._lock = threading.Lock()
        self._runtimes: dict[str, Runtime] = {}
        self.running: dict[str, threading.Thread] = {}  # agents run at a request's ask
        self.sessions: SessionFinder | None = None  # the web page's, once it is served
        self.streams = Counts()  # each token's open streams
        self.uploads = Counts()  # archives being received (under "")
        self._turns: weakref.WeakValueDictionary[str, _Turn] = weakref.WeakValueDictionary()
        self.workers: ServerWorkers | None = None  # the server's own, unless --workers 0

    def nudge(self) -> None:
        """A request wrote something that may give an agent work: the server's own
        worker looks for it now."""
        if self.workers is not None:
            self.workers.nudge()

    def unplaced(self, text: str) -> str:
        """``text`` (an error's words) without where the server keeps its folders: a
        path under the spec or the data folder is told relative to it, so a caller
        learns nothing of the host's layout."""
        for folder in (self.specs, self.data_dir):
            if folder is None:
                continue
            for place in {str(folder.resolve()), str(folder) if folder.is_absolute() else ""}:
                if place and place != os.sep:
                    text = text.replace(place + os.sep, "").replace(place, "the server's folder")
        return text

    def in_background(self, agent_id: str, work: Callable[[], None]) -> None:
        """Start ``work`` (running the agent) on a thread of its own; refused while a
        run of that agent this server started is still going."""
        with self._lock:
            busy = self.running.get(agent_id)
            if busy is not None and busy.is_alive():
                raise UsageError(f"agent {agent_id} is running on this server already")
            thread = threading.Thread(target=work, name=f"serve-{agent_id}", daemon=True)
            self.running[agent_id] = thread
            thread.start()

    def turn(self, key: str) -> _Turn:
        """The queue of this server's requests that write to ``key`` (an agent, an
        approval): they take turns here rather than meet at the agent's lease, where
        all but one would be refused. Forgotten once no request holds it."""
        with self._lock:
            found = self._turns.get(key)
            if found is None:
                found = self._turns[key] = _Turn()
            return found

    def runtime(self, token: TokenRecord) -> Runtime:
        """The token's tenant's runtime, as the token's holder."""
        with self._lock:
            rt = self._runtimes.get(token.tenant)
            if rt is None:
                rt = Runtime(
                    self.store,
                    self.data_dir,
                    clock=self.clock,
                    tenant=token.tenant,
                    blobs=self.blobs,
                    secret_key=self.secret_key,
                )
                self._runtimes[token.tenant] = rt
        mine = copy.copy(rt)  # shares the store and blobs; only who acts differs
        who = f"{token.name} (token {token.token_id})"
        mine.person = lambda: who
        return mine

    def close(self) -> None:
        if self.workers is not None:
            self.workers.stop()
        for thread in list(self.running.values()):
            thread.join(timeout=30)
        with self._lock:
            for rt in self._runtimes.values():
                rt.close()
            self._runtimes.clear()
        self.store.close()


def _client(request: Request) -> str:
    # the connection's address, or the one a proxy named in --forwarded-allow-ips gave
    return request.client.host if request.client is not None else "unknown"


@dataclass(frozen=True, slots=True)
class Refused:
    """A token not accepted: the answer's code and words, and seconds to wait (429)."""

    code: str
    message: str
    wait: float = 0.0

    def answer(self) -> Response:
        if self.wait <= 0:
            return problem(self.code, self.message)
        return problem(self.code, self.message, headers={"retry-after": str(int(self.wait) + 1)})


async def check_token(
    server: Server, request: Request, presented: str, path: str
) -> TokenRecord | Refused:
    """The live token ``presented`` is, or why not, counted against the client.

    A valid token is accepted even from a client held off: holding it off would
    let whoever shares its address lock its holder out, and with 256 bits of
    secret there is nothing to guess. A held-off client's failures are answered
    429, and what it sends that is not even shaped like a token is refused
    without a look at the store.
    """
    address = _client(request)
    held = server.attempts.held_off(address) > 0
    if held and not auth.shaped_like_a_token(presented):
        found: TokenRecord | auth.Refusal = auth.Refusal("not a stead token")
    else:
        found = await run_in_threadpool(auth.authenticate, server.tokens, presented)
    if not isinstance(found, auth.Refusal):
        return found
    kind = server.attempts.failed(address)
    if kind is not None:
        await run_in_threadpool(
            server.tokens.log_operator, kind,
            {"from": address, "reason": found.reason, "token_id": found.token_id, "path": path},
            server.clock.now(),
        )  # fmt: skip
    wait = server.attempts.held_off(address)
    if held and wait > 0:
        return Refused(
            "too_many_attempts",
            f"too many failed attempts from {address}; try again in {int(wait) + 1} s",
            wait,
        )
    return Refused("unauthenticated", "the API token is not valid (unknown, wrong or revoked)")


def _still_valid(server: Server, token_id: str) -> Callable[[], bool]:
    def alive() -> bool:
        record = server.tokens.get_token(token_id)
        return record is not None and record.revoked_at is None

    return alive


async def _authenticated(
    server: Server, request: Request
) -> tuple[TokenRecord, Callable[[], bool]] | Response:
    header = request.headers.get("authorization", "")
    presented = header[7:].strip() if header[:7].lower() == "bearer " else ""
    if not presented and request.method == "GET" and server.sessions is not None:
        # the web page's own reads (its journal stream), by its session: only reads,
        # so a form elsewhere cannot make a logged-in browser change anything
        sid = request.cookies.get("stead_web", "")
        web = server.sessions.find(sid)
        if web is not None:
            sessions = server.sessions
            return web[1], lambda: sessions.find(sid) is not None
    if not presented:
        return problem(
            "unauthenticated",
            "this needs an API token: send `Authorization: Bearer TOKEN` (make one with "
            "`stead token create --tenant T --role R`)",
        )
    found = await check_token(server, request, presented, request.url.path)
    if isinstance(found, Refused):
        return found.answer()
    return found, _still_valid(server, found.token_id)


def _parsed(endpoint: Endpoint, raw: bytes) -> Any:
    """The JSON body, checked against the endpoint's schema, or the answer refusing it."""
    try:
        body = json.loads(raw or b"null")
        jsonschema.validate(body, endpoint.body or {})
    except ValueError as exc:
        return problem("bad_request", f"the body is not JSON: {exc}")
    except RecursionError:
        return problem("bad_request", "the body is JSON nested too deeply to read; flatten it")
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the body"
        return problem("bad_request", f"{where}: {exc.message}")
    return body


def _handler(server: Server, endpoint: Endpoint) -> Callable[[Request], Any]:
    async def handle(request: Request) -> Response:
        who = await _authenticated(server, request)
        if isinstance(who, Response):
            return who
        token, alive = who
        odd = odd_path_part(request.path_params)
        if odd is not None:
            return problem("bad_request", odd)
        if not auth.allows(token.role, endpoint.action):
            return problem(
                "forbidden",
                f"a {token.role} token cannot {endpoint.summary[0].lower()}"
                f"{endpoint.summary[1:]}; it needs the role {auth.ACTIONS[endpoint.action]}",
            )
        if not endpoint.raw:
            return await _answer(server, endpoint, request, token, alive)
        # each archive being received takes up to MAX_RAW_BODY of the host's disk
        if not server.uploads.take("", bodies.MAX_SPILLED):
            return problem(
                "too_many_uploads",
                f"the server is receiving {bodies.MAX_SPILLED} archives already; try again soon",
                headers={"retry-after": "5"},
            )
        try:
            return await _answer(server, endpoint, request, token, alive)
        finally:
            server.uploads.give_back("")

    return handle


async def _answer(
    server: Server,
    endpoint: Endpoint,
    request: Request,
    token: TokenRecord,
    alive: Callable[[], bool],
) -> Response:
    """The endpoint's answer to an authenticated request: its body read and checked,
    its handler run."""
    body: Any = None
    if endpoint.raw or endpoint.body is not None:
        limit = bodies.MAX_RAW_BODY if endpoint.raw else bodies.MAX_BODY
        got = await bodies.read(request, limit, spill=endpoint.raw)
        if isinstance(got, Response):
            return got
        if endpoint.raw:
            body = got  # the handler reads it from disk (body.path); removed below
        else:
            body = _parsed(endpoint, bytes(got.data))
            if isinstance(body, Response):
                return body
    call = Call(
        server.runtime(token),
        token,
        dict(request.path_params),
        dict(request.query_params),
        body,
        server,
        request.headers,
        alive,
    )
    try:
        answer = await run_in_threadpool(endpoint.handler, call)
    except SteadError as exc:
        return from_error(exc, server.unplaced(str(exc)))
    finally:
        if endpoint.raw and body is not None:
            body.close()
    if request.method != "GET":
        server.nudge()
    if isinstance(answer, Response):
        return answer
    if answer is None:
        return Response(status_code=204)
    return JSONResponse(answer, status_code=endpoint.status)


def make_app(server: Server, endpoints: list[Endpoint], extra: list[Route]) -> Starlette:
    """The ASGI application: ``endpoints`` behind authentication, ``extra`` open."""
    routes = [
        Route(e.path, _handler(server, e), methods=[e.method], name=f"{e.method} {e.path}")
        for e in endpoints
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return problem("no_such_route", f"there is no {request.url.path}; see /v1/openapi.json")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return problem(
            "method_not_allowed", f"{request.method} is not answered at {request.url.path}"
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await run_in_threadpool(server.close)

    app = Starlette(
        routes=[*extra, *routes],
        exception_handlers={404: not_found, 405: not_allowed},
        lifespan=lifespan,
        middleware=[Middleware(_Guarded)],
    )
    app.state.server = server
    return app


class _Guarded:
    """Adds :data:`SECURITY_HEADERS` to every answer that has not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, guarded)
