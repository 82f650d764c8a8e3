"""What an agent's model is writing right now, for whoever watches in this process.

A provider model that streams its answer (:mod:`stead.models.sse`) publishes
the text as it grows; ``stead run`` prints it, the API's event stream sends it
as ``event: text`` and the page shows it in the agent's timeline. It is never
journaled and never kept: the finished decision is what the journal holds, and
a watcher that comes late or misses a piece has lost nothing the journal does
not tell. So the channel is in-process only, and best effort: a watcher that
cannot keep up loses pieces, never slows the model.

Each :class:`Piece` carries the whole text of the answer so far (redacted of
the agent's secrets as a whole, so a key split across two deltas is still
hidden), at most :data:`MAX_TEXT` characters of it; publishing is throttled to
one piece each :data:`EVERY_SECONDS` per agent, and the last one of an answer
(``done``) always goes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_TEXT = 64 * 1024
"""The most of one answer's text a watcher is shown as it is written."""

EVERY_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class Piece:
    agent_id: str
    text: str
    """The answer's text so far."""
    done: bool = False
    """The answer is whole (its decision is next in the journal)."""


Watcher = Callable[[Piece], None]


class Channel:
    """Watchers by agent (``None``: every agent), and the pieces published to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watchers: dict[str | None, list[Watcher]] = {}

    def watch(self, agent_id: str | None, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher`` with each piece of ``agent_id``'s answers (of every agent's
        for ``None``); returns what stops it."""
        with self._lock:
            self._watchers.setdefault(agent_id, []).append(watcher)

        def stop() -> None:
            with self._lock:
                found = self._watchers.get(agent_id, [])
                if watcher in found:
                    found.remove(watcher)
                if not found:
                    self._watchers.pop(agent_id, None)

        return stop

    def watched(self, agent_id: str) -> bool:
        return bool(self._watchers.get(agent_id) or self._watchers.get(None))

    def publish(self, piece: Piece) -> None:
        with self._lock:
            watchers = [*self._watchers.get(piece.agent_id, ()), *self._watchers.get(None, ())]
        for watcher in watchers:
            try:
                watcher(piece)
            except Exception:  # a watcher's failure is its own, never the model's
                continue


CHANNEL = Channel()
"""The process's channel."""


class Speaker:
    """One agent's model publishing one answer after another to :data:`CHANNEL`."""

    def __init__(
        self,
        agent_id: str,
        redact: Callable[[str], str],
        channel: Channel = CHANNEL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.agent_id = agent_id
        self._redact = redact
        self._channel = channel
        self._clock = clock
        self._parts: list[str] = []
        self._size = 0
        self._last = float("-inf")

    def begin(self) -> None:
        """A new attempt: what an earlier one wrote is forgotten."""
        self._parts, self._size = [], 0

    def add(self, text: str) -> None:
        if not text or self._size >= MAX_TEXT:
            return
        self._parts.append(text[: MAX_TEXT - self._size])
        self._size += len(self._parts[-1])
        now = self._clock()
        if now - self._last >= EVERY_SECONDS:
            self._last = now
            self._send(done=False)

    def end(self) -> None:
        if self._parts:
            self._send(done=True)
        self._parts, self._size = [], 0

    def _send(self, done: bool) -> None:
        if self._channel.watched(self.agent_id):
            text = self._redact("".join(self._parts))
            self._channel.publish(Piece(self.agent_id, text, done))
