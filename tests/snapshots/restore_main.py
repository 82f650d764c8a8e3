"""One contender in a restore race: restore a snapshot once a start file appears.

``python restore_main.py DB DATA_DIR SNAPSHOT_ID READY GO`` opens a runtime on
the SQLite store ``DB``, touches READY, waits for GO to exist, and calls
:func:`stead.snapshots.hibernation.restore`. If the restore succeeded it sends the
agent ``go`` and runs it to its end. It prints one JSON line, its outcome:
``{"pid", "restore": "ok" | "error", "error", "message", "status", "lease_waits"}``,
and exits 0 (a refused restore is an outcome, not a failure of this program).

Starting several of these and creating GO once all are ready makes them reach
the snapshot within a millisecond or so of each other, instead of a Python
start-up apart.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from stead import Runtime
from stead.errors import LeaseHeld
from stead.snapshots.hibernation import restore
from stead.store.sqlite import SqliteStore

T = TypeVar("T")
LEASE_PATIENCE = 15.0
"""How long the winner keeps asking for a lease a losing restore holds for a moment."""


def patiently(call: Callable[[], T], waits: list[int]) -> T:
    """``call()``, asked again while a loser holds the agent's lease to look at it."""
    deadline = time.monotonic() + LEASE_PATIENCE
    while True:
        try:
            return call()
        except LeaseHeld:
            if time.monotonic() > deadline:
                raise
            waits[0] += 1
            time.sleep(0.01)


def main(argv: list[str]) -> int:
    db, data_dir, snapshot_id, ready, go = argv
    rt = Runtime(SqliteStore(db), data_dir)
    out: dict[str, object] = {"pid": os.getpid()}
    try:
        agent_id = rt.store.get_snapshot(snapshot_id).agent_id
        Path(ready).touch()
        while not Path(go).exists():
            time.sleep(0.0005)
        try:
            restore(rt, snapshot_id)
        except Exception as exc:
            out.update(restore="error", error=type(exc).__name__, message=str(exc))
            return 0
        out["restore"] = "ok"
        waits = [0]
        patiently(lambda: rt.send(agent_id, "go"), waits)
        outcome = patiently(lambda: rt.run(agent_id), waits)
        out.update(status=outcome.state.status, lease_waits=waits[0])
        return 0
    except Exception as exc:  # after a won restore: reported, and the test fails on it
        out.update(after_restore_error=type(exc).__name__, message=str(exc))
        return 0
    finally:
        rt.close()
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
