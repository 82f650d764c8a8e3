"""``stead work``'s log: a line on stderr as each activation starts and ends.

``text`` is for people (``12:00:01 start ag_… (writer)``, then ``end … completed,
4 steps, 1,234 tokens, $0.0021``); ``json`` is one object a line for machines,
with ``event`` (``start``, ``end`` or ``error``), ``at`` (ISO 8601, UTC),
``agent_id`` and ``name``, and at an end ``status``, ``reason``, ``steps``
and the agent's ``tokens`` and ``spend`` so far. Lines are written whole, under
a lock: activations end on many threads at once.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, TextIO

from ..clock import iso
from ..errors import SteadError
from ..runtime.activation import Outcome
from ..runtime.runtime import Runtime
from ..summaries import shown
from ..workers.threaded import Worker

FORMATS = ("text", "json")


class WorkLog:
    """The hooks a worker calls, writing each activation's start and end to ``stream``."""

    def __init__(self, runtime: Runtime, form: str, stream: TextIO | None = None) -> None:
        self.runtime = runtime
        self.form = form
        self.stream = stream if stream is not None else sys.stderr
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}

    def attach(self, worker: Worker) -> None:
        worker.on_start = self.started
        worker.on_outcome = self.ended
        worker.on_error = self.failed

    def _name(self, agent_id: str) -> str:
        if agent_id not in self._names:
            try:
                self._names[agent_id] = self.runtime.store.get_record(agent_id).name
            except SteadError:
                self._names[agent_id] = "?"
        return self._names[agent_id]

    def started(self, agent_id: str) -> None:
        self._write({"event": "start", "agent_id": agent_id, "name": self._name(agent_id)})

    def ended(self, agent_id: str, outcome: Outcome) -> None:
        state = outcome.state
        self._write(
            {
                "event": "end",
                "agent_id": agent_id,
                "name": self._name(agent_id),
                "status": state.status,
                "reason": state.status_reason or "",
                "steps": outcome.steps,
                "tokens": int(state.usage.get("tokens", 0)),
                "spend": round(float(state.usage.get("spend", 0)), 6),
            }
        )

    def failed(self, agent_id: str, message: str) -> None:
        self._write(
            {"event": "error", "agent_id": agent_id, "name": self._name(agent_id), "error": message}
        )

    def _write(self, entry: dict[str, Any]) -> None:
        entry = {"at": iso(self.runtime.clock.now()), **entry}
        line = (
            json.dumps(entry, ensure_ascii=False, sort_keys=True)
            if self.form == "json"
            else _text(entry)
        )
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()


def _text(e: dict[str, Any]) -> str:
    head = f"{e['at'][11:19]} {e['event']:<5} {e['agent_id']} ({shown(str(e['name']))})"
    if e["event"] == "start":
        return head
    if e["event"] == "error":
        return f"{head}: error: {shown(str(e['error']))}"
    line = f"{head}: {e['status']}, {e['steps']} steps, {e['tokens']:,} tokens, ${e['spend']:.4f}"
    reason = " ".join(str(e["reason"]).split())
    if reason and e["status"] != "completed":
        line += f" ({shown(reason[:160])})"
    return line
