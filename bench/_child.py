"""One resume measurement, in its own process (see :mod:`bench.resume`).

Usage: python -m bench._child DB_OR_STORE_URL DATA_DIR AGENT_ID DECISIONS_SO_FAR

Prints JSON: the time to open a new ``Runtime`` on the database, to run one
step (take the lease, load the state, recover, decide, call the tool, commit,
release the lease), of which reading the agent's record and state, and to close
the store, with the kinds of the events the step journaled. Modules are
imported before the clock starts: importing is a fixed cost of starting Python,
not of resuming an agent.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

# imported lazily by open_store: importing them here keeps it out of the timing
import stead.store.postgres
import stead.store.sqlite  # noqa: F401
from stead import Event, Runtime

from . import workload


def main(argv: Sequence[str]) -> int:
    db, data_dir, agent_id, decisions = argv
    model = workload.model_at(int(decisions))
    kinds: list[str] = []
    commits: list[int] = []

    def on_commit(events: Sequence[Event]) -> None:
        kinds.extend(str(e.kind) for e in events)
        commits.append(len(events))

    t0, c0 = time.perf_counter(), time.process_time()
    rt = Runtime(db if "://" in db else f"sqlite:///{db}", data_dir=data_dir)
    t1 = time.perf_counter()
    # the part of resuming that could depend on history: reading the agent's record and state
    load_s = 0.0
    for name in ("get_record", "load_state"):
        inner = getattr(rt.store, name)

        def timed(*args: Any, _inner: Any = inner, **kwargs: Any) -> Any:
            nonlocal load_s
            t = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                load_s += time.perf_counter() - t

        setattr(rt.store, name, timed)
    outcome = rt.run(agent_id, model=model, tools=workload.TOOLS, max_steps=1, on_commit=on_commit)
    t2, c2 = time.perf_counter(), time.process_time()
    rt.close()
    t3 = time.perf_counter()
    if outcome.steps != 1:
        print(f"expected one step, the agent made {outcome.steps}", file=sys.stderr)
        return 1
    json.dump(
        {
            "open_ms": (t1 - t0) * 1e3,
            "run_ms": (t2 - t1) * 1e3,
            "load_ms": load_s * 1e3,
            "resume_ms": (t2 - t0) * 1e3,
            "cpu_ms": (c2 - c0) * 1e3,
            "close_ms": (t3 - t2) * 1e3,
            "kinds": kinds,
            "journal_commits": len(commits),
            "decisions": outcome.state.decisions,
            "version": outcome.state.version,
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
