"""A fake model service for the upgrade tests that drive a provider's model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..models.fake_servers import FakeServer


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A fake model service on 127.0.0.1, answering from its queue."""
    with FakeServer() as s:
        yield s
