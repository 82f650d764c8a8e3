"""Run the ``stead`` command line once a start file appears, so workers race for real.

``python barrier_main.py READY GO stead-args...`` imports stead, touches READY,
waits for GO to exist, then runs ``stead stead-args...``. Starting several of
these and creating GO once all are ready makes them reach the lease within a
millisecond or so of each other, instead of a Python start-up apart.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from stead.cli.main import main

if __name__ == "__main__":
    ready, go = Path(sys.argv[1]), Path(sys.argv[2])
    ready.touch()
    while not go.exists():
        time.sleep(0.0005)
    sys.exit(main(sys.argv[3:]))
