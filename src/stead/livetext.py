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
one piece each :data:`EVERY_SECONDS` per agent (what came in between is sent
when that time is up, so a pause shows the text up to it), and the last one of
an answer (``done``) always goes. Nothing is redacted or sent for an agent no
one watches.
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
    step: int = 0
    """The decision the answer is for (``step`` of its ``decision`` event), 0 if unknown:
    a watcher that has the decision already knows the text is stale."""


Watcher = Callable[[Piece], None]


class Channel:
    """Watchers by agent (``None``: every agent), and the pieces published to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watchers: dict[str | None, list[Watcher]] = {}
        self._speakers: dict[str, Speaker] = {}

    def speaking(self, speaker: Speaker, now: bool) -> None:
        """``speaker``'s model is writing an answer (``now``), or has ended it."""
        with self._lock:
            if now:
                self._speakers[speaker.agent_id] = speaker
            elif self._speakers.get(speaker.agent_id) is speaker:
                del self._speakers[speaker.agent_id]

    def watch(self, agent_id: str | None, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher`` with each piece of ``agent_id``'s answers (of every agent's
        for ``None``); returns what stops it."""
        with self._lock:
            self._watchers.setdefault(agent_id, []).append(watcher)
            speaking = [v for k, v in self._speakers.items() if agent_id in (None, k)]
        for speaker in speaking:  # a watcher that comes mid-answer sees it so far
            speaker.resend()

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
        self._sent = 0  # the size of the text last published
        self._last = float("-inf")
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.step = 0
        """The decision the answer being written is for."""

    def begin(self) -> None:
        """A new attempt: what an earlier one wrote is forgotten."""
        with self._lock:
            self._parts, self._size, self._sent = [], 0, 0
        self._channel.speaking(self, True)

    def resend(self) -> None:
        """Send the text so far again (to a watcher that has just come)."""
        self._send(done=False, again=True)

    def add(self, text: str) -> None:
        if not text or self._size >= MAX_TEXT:
            return
        with self._lock:
            self._parts.append(text[: MAX_TEXT - self._size])
            self._size += len(self._parts[-1])
        if not self._channel.watched(self.agent_id):
            return  # no one to show: nothing redacted, nothing scheduled
        wait = self._last + EVERY_SECONDS - self._clock()
        if wait <= 0:
            self._send(done=False)
        elif self._timer is None:  # the last piece before a pause is shown too
            self._timer = threading.Timer(wait, self._send, kwargs={"done": False})
            self._timer.daemon = True
            self._timer.start()

    def end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._channel.speaking(self, False)
        if self._parts:
            self._send(done=True)
        with self._lock:
            self._parts, self._size, self._sent = [], 0, 0

    def _send(self, done: bool, again: bool = False) -> None:
        with self._lock:
            if not again:
                self._timer = None
            unchanged = self._size == self._sent and not (done or again)
            if unchanged or not self._parts or not self._channel.watched(self.agent_id):
                return
            self._last, self._sent = self._clock(), self._size
            text = self._redact("".join(self._parts))
        self._channel.publish(Piece(self.agent_id, text, done, self.step))
