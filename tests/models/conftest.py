"""Fixtures for the model tests: a fake model service of each wire format."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_servers import FakeServer


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A fake model service on 127.0.0.1, answering from its queue or its responder."""
    with FakeServer() as s:
        yield s
