"""Workload 5, stead's side: crash recovery (not measured yet).

The hook the comparison calls is :data:`MEASURE`, ``None`` until stead has a
multi-agent worker to kill. What a function put there must do: start a worker
process driving ``agents`` agents of the bench agent (:mod:`bench.workload`)
in a fresh store under ``workdir``; once all of them are mid-run, SIGKILL it;
start a new worker on the same store; and return at least ``recovery_s``, the
time from the new worker starting to every agent having completed a step in
it, plus ``agents``. The peers do not run this workload.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import crash_stead

MEASURE: Callable[[Path, int], dict[str, Any]] | None = crash_stead.measure
"""``MEASURE(workdir, agents)``; ``None`` skips workload 5."""
