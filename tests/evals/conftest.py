"""The figures of one real run of the governed agent, for the tests of what is made
from them (the summary, the reports, comparisons)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .test_measure import measured, run_agent


@pytest.fixture(scope="session")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The measured figures of one real run of the governed agent."""
    tmp = tmp_path_factory.mktemp("agent")
    mp = pytest.MonkeyPatch()
    mp.setenv("STEAD_DEMO_CHANGELOG", str(tmp / "changelog.txt"))
    rt, agent, before = run_agent(Path(tmp))
    try:
        return measured(rt, agent, before)
    finally:
        rt.close()
        mp.undo()
