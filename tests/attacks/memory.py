"""How much memory a call took: the process's resident set, sampled while it runs.

The Python allocator gives large blocks back when they are freed, so the
resident size after a call says little; what a hostile answer costs is the
peak while it is read. :class:`PeakRss` samples ``VmRSS`` from
``/proc/self/status`` every few milliseconds on a thread of its own.
"""

from __future__ import annotations

import threading
from types import TracebackType

MB = 1024 * 1024


def rss() -> int:
    """This process's resident set size, in bytes (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class PeakRss:
    """``with PeakRss() as peak: ...`` then ``peak.growth``: the most the resident
    set rose above where it was at the start, in bytes."""

    def __init__(self, every: float = 0.002) -> None:
        self.every = every
        self.start = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, rss())

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.start)

    def __enter__(self) -> PeakRss:
        self.start = self.peak = rss()
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())
