"""Time, from one injectable source.

Everything in stead that reads the time reads it from a :class:`Clock`, so tests
can drive time with :class:`FakeClock` and a journal records the same timestamps
a replay would see.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """A source of wall-clock time, in seconds since the Unix epoch."""

    def now(self) -> float:
        """Return the current time in seconds since the epoch."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()


class FakeClock:
    """A clock that only moves when told to; for tests and replays."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        if seconds < 0:
            raise ValueError("a clock never goes backwards; pass a non-negative number")
        with self._lock:
            self._now += seconds

    def set(self, when: float) -> None:
        """Jump to ``when``, which must not be earlier than now."""
        with self._lock:
            if when < self._now:
                raise ValueError("a clock never goes backwards")
            self._now = when


def iso(ts: float) -> str:
    """Format a timestamp as ISO 8601 UTC with millisecond precision, for people."""
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds")
