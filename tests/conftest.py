"""Fixtures shared across test folders."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from stead.sandbox.bwrap import BwrapSandbox
from stead.sandbox.select import probe

from .needs import missing

CHAOS = os.path.join("tests", "chaos", "")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything in tests/chaos kills real processes: ``make test-fast`` leaves it out."""
    for item in items:
        if CHAOS in str(item.path):
            item.add_marker(pytest.mark.chaos)


@pytest.fixture(scope="session")
def bwrap() -> BwrapSandbox:
    """The machine's bubblewrap sandbox. CI must have one; elsewhere, skip and say why."""
    found, why = probe()
    if found is None:
        missing(f"no sandbox on this machine: {why}", "be able to sandbox")
    return found


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A local S3-compatible server (moto's) for the session; tests make their own buckets."""
    from .s3 import moto_server

    with moto_server() as endpoint:
        yield endpoint
