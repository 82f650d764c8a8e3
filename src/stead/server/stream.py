"""An agent's journal as Server-Sent Events, resumable where the client left off.

Each event is sent as it is committed: ``id`` is its sequence number,
``event`` its kind and ``data`` its JSON, so a client that reconnects with
``Last-Event-ID`` (every browser's ``EventSource`` does) gets what came after,
and nothing twice. What the agent's model is writing, while it streams in
this process (a worker of ``stead serve``'s own), is sent as ``event: text``
with the text so far and no ``id`` (:mod:`stead.livetext`): it is no journal
event, and resuming stays the journal's. The stream looks at the store twice a second and sends a
comment every 15 seconds when nothing happens, so proxies keep it open; it
ends when the client goes, or when its credential does: the token (or the
page's session) is looked at again every :data:`RECHECK_SECONDS`, so a revoked
token reads nothing more. A token holds at most :data:`MAX_STREAMS` streams open
at once (more are answered ``429 too_many_streams``), so it cannot hold the
server's connections and store reads as many times as it likes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ..livetext import CHANNEL, Piece
from .app import Call
from .errors import problem
from .schemas import whole

POLL_SECONDS = 0.5
KEEPALIVE_SECONDS = 15.0
RECHECK_SECONDS = 2.0
MAX_STREAMS = 8
_BATCH = 200


class _Following(StreamingResponse):
    """A stream that gives its place back (``release``) however it ends."""

    def __init__(self, frames: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(
            frames,
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _start(call: Call) -> int:
    given = call.headers.get("last-event-id") or call.query.get("after") or "0"
    return whole(given, "Last-Event-ID (or ?after=), an event's sequence number,")


def _text_frame(piece: Piece) -> str:
    """The model's text so far, as an event with no ``id``: it is not the journal's,
    so a client's ``Last-Event-ID`` still names the last journal event it had."""
    body = json.dumps(
        {"agent_id": piece.agent_id, "text": piece.text, "done": piece.done, "step": piece.step}
    )
    return f"event: text\ndata: {body}\n\n"


def stream(call: Call) -> Any:
    agent_id = call.params["agent_id"]
    after = _start(call)
    store = call.rt.store
    store.get_record(agent_id)  # another tenant's agent is not found, before streaming
    token_id = call.token.token_id
    if not call.server.streams.take(token_id, MAX_STREAMS):
        return problem(
            "too_many_streams",
            f"this token has {MAX_STREAMS} streams open already; close one (or wait for it "
            "to end) before opening another",
            headers={"retry-after": "5"},
        )

    def read(seq: int) -> list[Any]:
        return list(store.read_events(agent_id, seq + 1, seq + _BATCH))

    async def frames() -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        seq, quiet, checked = after, 0.0, loop.time()
        latest: list[Piece] = []  # the newest piece of text only: a slow client skips
        arrived = asyncio.Event()

        def heard(piece: Piece) -> None:  # on the model's thread
            latest[:] = [piece]
            loop.call_soon_threadsafe(arrived.set)

        unwatch = CHANNEL.watch(agent_id, heard)
        try:
            yield "retry: 2000\n\n"
            while True:
                if loop.time() - checked >= RECHECK_SECONDS:
                    if not await run_in_threadpool(call.alive):
                        yield ": the token was revoked or the session ended\n\n"
                        return
                    checked = loop.time()
                if latest:  # before the journal read: text comes before its decision
                    yield _text_frame(latest.pop())
                page = await run_in_threadpool(read, seq)
                for ev in page:
                    body = json.dumps(ev.to_json(), sort_keys=True, ensure_ascii=False)
                    yield f"id: {ev.seq}\nevent: {ev.kind}\ndata: {body}\n\n"
                    seq = ev.seq
                if len(page) == _BATCH:
                    continue
                if page:
                    quiet = 0.0
                elif quiet >= KEEPALIVE_SECONDS:
                    yield ": still here\n\n"
                    quiet = 0.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), POLL_SECONDS)
                arrived.clear()
                quiet += POLL_SECONDS
        finally:
            unwatch()

    return _Following(frames(), lambda: call.server.streams.give_back(token_id))
