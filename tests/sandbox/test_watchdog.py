"""The sandbox watchdog kills what it holds at its deadline, and only then."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from stead.sandbox import watchdog


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def _ended_within(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_a_process_is_killed_at_its_deadline(sleeper: subprocess.Popen[bytes]) -> None:
    ok, why = watchdog.available()
    assert ok, why
    watchdog.guard(sleeper.pid, None, time.monotonic() + 0.3)
    assert _ended_within(sleeper, 10)
    assert sleeper.returncode == -9


def test_a_deadline_moved_on_or_dropped_kills_nothing(
    sleeper: subprocess.Popen[bytes],
) -> None:
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        moved = watchdog.guard(sleeper.pid, None, time.monotonic() + 0.3)
        moved.hold(time.monotonic() + 30)
        dropped = watchdog.guard(other.pid, None, time.monotonic() + 0.3)
        dropped.drop()
        assert dropped.dropped
        assert not _ended_within(sleeper, 1.0)
        assert other.poll() is None
        moved.hold(time.monotonic())  # now
        assert _ended_within(sleeper, 10)
    finally:
        other.kill()
        other.wait()


def test_no_deadline_holds_until_told(sleeper: subprocess.Popen[bytes]) -> None:
    held = watchdog.guard(sleeper.pid, None, None)
    assert not _ended_within(sleeper, 0.5)
    held.hold(time.monotonic() + 0.1)
    assert _ended_within(sleeper, 10)
