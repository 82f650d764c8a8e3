"""What a test needs of the machine, said once: skip here, fail in CI.

A developer's machine may lack something a test needs (a sandbox, the system
python3, ``chattr``); the test then skips and says why. CI (``CI=true``) runs
on a machine its own set-up prepared, so there a missing need is a failure,
never a silent skip.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(why: str, what: str) -> NoReturn:
    """Skip for ``why``; in CI, fail saying it must run ``what``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must {what}: {why}")
    pytest.skip(why)
