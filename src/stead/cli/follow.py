"""``stead trace --follow``: an agent's journal as it is written.

The journal is read from where the command starts, then again every
:data:`POLL_SECONDS` for what was committed since, on any store (a worker
elsewhere, on another host, writes the events: the journal is the one thing
every watcher can read). It ends when the agent has ended (completed, failed
or moved away) and every event up to that is printed, or at Ctrl-C. Only
committed events are printed; nothing a later crash could take back.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from rich.text import Text

from ..clock import iso
from ..journal import Event
from ..state import FINAL_STATUSES
from ..store.base import Store
from .common import EXIT_COMPLETED, out
from .progress import trace_detail

POLL_SECONDS = 0.25
_BATCH = 500


def follow(
    store: Store,
    agent_id: str,
    from_seq: int,
    as_json: bool,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print ``agent_id``'s events from ``from_seq`` on as they are committed, until
    the agent ends (then exit 0) or the user interrupts."""
    status = store.load_state(agent_id).status  # also: an unknown agent is an error now
    seq = max(from_seq, 1) - 1
    try:
        while True:
            page = list(store.read_events(agent_id, seq + 1, seq + _BATCH))
            for ev in page:
                _print(ev, as_json)
                seq = ev.seq
            if len(page) == _BATCH:
                continue
            if page:  # the status as the events just printed left it (a fold, not a field)
                status = store.load_state(agent_id).status
            elif status in FINAL_STATUSES:
                return EXIT_COMPLETED  # ended, and one more look found nothing after
            sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        return EXIT_COMPLETED


def _print(ev: Event, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(ev.to_json(), sort_keys=True) + "\n")
        sys.stdout.flush()
        return
    line = Text(f"{ev.seq:>5} {iso(ev.at)[11:23]} {ev.kind:<16} ")
    line.append(trace_detail(ev))
    out.print(line)
