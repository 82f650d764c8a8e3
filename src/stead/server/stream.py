"""An agent's journal as Server-Sent Events, resumable where the client left off.

Each event is sent as it is committed: ``id`` is its sequence number,
``event`` its kind and ``data`` its JSON, so a client that reconnects with
``Last-Event-ID`` (every browser's ``EventSource`` does) gets what came after,
and nothing twice. The stream looks at the store twice a second and sends a
comment every 15 seconds when nothing happens, so proxies keep it open; it
ends when the client goes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from ..errors import UsageError
from .app import Call

POLL_SECONDS = 0.5
KEEPALIVE_SECONDS = 15.0
_BATCH = 200


def _start(call: Call) -> int:
    given = call.headers.get("last-event-id") or call.query.get("after") or "0"
    if not given.isdigit() or int(given) > 2**62:
        raise UsageError(f"Last-Event-ID (or ?after=) is an event's sequence number, not {given!r}")
    return int(given)


def stream(call: Call) -> Any:
    agent_id = call.params["agent_id"]
    after = _start(call)
    store = call.rt.store
    store.get_record(agent_id)  # another tenant's agent is not found, before streaming

    def read(seq: int) -> list[Any]:
        return list(store.read_events(agent_id, seq + 1, seq + _BATCH))

    async def frames() -> AsyncIterator[str]:
        seq, quiet = after, 0.0
        yield "retry: 2000\n\n"
        while True:
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
            await asyncio.sleep(POLL_SECONDS)
            quiet += POLL_SECONDS

    return StreamingResponse(
        frames(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
