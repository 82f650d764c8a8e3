"""Request bodies, read with a bound and a deadline.

A body is read as it arrives, into memory when it is small (a JSON body, a
form) or into a temporary file when it may be big (an archive), and
refused as soon as it passes its bound (``413``), before it is all sent. It
must also arrive in time (``408``): within :data:`GRACE_SECONDS`, plus a
second for every :data:`RATE` bytes it has brought so far. So a client on a
slow link still sends a big archive, while one that sends a byte now and then
holds its connection for seconds, not for as long as it likes, and never a
thread (the body is read on the event loop). What a refusal says names no path
of the host.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import IO

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from .errors import problem

MAX_BODY = 1 << 20
"""Bytes a JSON body or a form may have: a spec, a message, a grant."""
MAX_RAW_BODY = 256 << 20
"""Bytes a raw body may have: an agent's archive."""
MAX_SPILLED = 4
"""Archives a server receives at once (each up to :data:`MAX_RAW_BODY` on disk)."""
GRACE_SECONDS = 10.0
RATE = 256 << 10
"""Bytes a second a body keeps up, on average, past its grace (a 256 MiB archive has
about 17 minutes; a JSON body at most 14 s)."""


class Body:
    """Where a body was read to: ``data`` (in memory) or the file at ``path`` (on
    disk, in a folder of its own that only this user may enter, removed at
    :meth:`close`)."""

    def __init__(self, spill: bool) -> None:
        self.data = bytearray()
        self.size = 0
        self._folder = Path(tempfile.mkdtemp(prefix="stead-body-")) if spill else None
        self.path = self._folder / "body" if self._folder is not None else None
        self._file: IO[bytes] | None = self.path.open("wb") if self.path is not None else None

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self._file is not None:
            self._file.write(chunk)
        else:
            self.data += chunk

    def done(self) -> None:
        if self._file is not None:
            self._file.close()

    def close(self) -> None:
        self.done()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


def _too_big(limit: int) -> Response:
    return problem("body_too_large", f"the body is over {limit} bytes; nothing was done")


async def read(request: Request, limit: int, *, spill: bool = False) -> Body | Response:
    """The request's body, or the answer refusing it (too big, too slow).

    With ``spill`` the body goes to a temporary file, removed at
    :meth:`Body.close` (the caller's to call); otherwise to memory.
    """
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return _too_big(limit)  # said up front: refused before a byte is read
    loop = asyncio.get_running_loop()
    start = loop.time()
    body = Body(spill)
    chunks = request.stream().__aiter__()
    try:
        while True:
            left = start + GRACE_SECONDS + body.size / RATE - loop.time()
            try:
                async with asyncio.timeout(max(left, 0.0)):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                break
            except TimeoutError:
                body.close()
                return problem(
                    "body_too_slow",
                    f"the body did not arrive in time (it must come within {GRACE_SECONDS:.0f} s "
                    f"and then at {RATE >> 10} KiB a second or more); nothing was done",
                    headers={"connection": "close"},
                )
            body.write(chunk)
            if body.size > limit:
                body.close()
                return _too_big(limit)
    except ClientDisconnect:
        body.close()
        return problem("bad_request", "the client went away before its body was sent")
    body.done()
    return body
