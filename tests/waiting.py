"""Waiting in a test for something another process does: up to a bound that only a
failure reaches, never a measure of the machine's speed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(what: Callable[[], T], seconds: float = 60.0) -> T:
    """``what()`` once it is truthy; fail once ``seconds`` pass without."""
    deadline = time.monotonic() + seconds
    while not (got := what()):
        assert time.monotonic() < deadline, f"waited {seconds:g}s in vain"
        time.sleep(0.1)
    return got
