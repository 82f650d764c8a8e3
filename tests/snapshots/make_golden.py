"""Writes ``tests/golden/archive_v1.stead``: run once when a format version is added.

Never regenerate an existing version's file: the point of it is that archives
written by that version stay readable by every later stead
(``test_golden_archives.py``).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from stead import FakeClock

from ..governance.agents import runtime_at
from .test_lineage import waiting_agent


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rt = runtime_at(Path(tmp), FakeClock())
        agent = waiting_agent(rt, Path(tmp))
        rt.export(agent, out)
        rt.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
