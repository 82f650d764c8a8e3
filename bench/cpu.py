"""Processor time, this process's or another's, for CPU per step beside wall time.

Wall time on a shared machine counts the time a process waits for a core that
someone else holds; processor time (user + system, every thread) counts only
the work it did. Every workload reports both (docs/benchmarks.md).
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system seconds of process ``pid`` so far (every thread), from /proc;
    0.0 when it cannot be read (the process is gone, or this is not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # the command name, field 2, may hold spaces: count from after its closing parenthesis
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK
