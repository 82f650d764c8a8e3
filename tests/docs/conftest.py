"""The reader every tutorial and how-to test follows its page as."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .tutorial import Reader, reader_env


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    """A reader's terminal in a fresh folder; what the page left running is stopped."""
    r = Reader(tmp_path, reader_env(tmp_path))
    try:
        yield r
    finally:
        r.close()
