"""What a commit tells the people who listen: webhook events and their payloads.

A store derives these from the events it is about to append and the status
the agent had before them, inside the write's own transaction
(:mod:`stead.store.webhook_rows`), so a notice exists exactly when its cause
was committed. This module is pure: events and statuses in, payloads out.

Four things are told:

* ``approval_requested`` (type ``approval.requested``): a call waits for a
  person's approval; one notice per request;
* ``needs_attention``, ``completed``, ``failed`` (types ``agent.needs_attention``,
  ``agent.completed``, ``agent.failed``): the agent's status became that one
  with this commit. A status passed through and left within one commit (one
  step) is not told; the commit's resulting status is. A restore from
  hibernation tells nothing of the status it brings back (it was told when
  first reached).

The body follows the Standard Webhooks shape: ``{"type", "timestamp", "data"}``.
What an agent wrote (a reason, a call's arguments) is shown with control
characters escaped and cut to a bound, never whole: the receiver is told what
waits for it, and reads the rest through the API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .clock import iso
from .journal import Event, Kind
from .state import State
from .summaries import shown

EVENT_TYPES = {
    "approval_requested": "approval.requested",
    "needs_attention": "agent.needs_attention",
    "completed": "agent.completed",
    "failed": "agent.failed",
}
"""Each event a webhook may subscribe to, and the ``type`` its payload carries."""
TOLD_STATUSES = ("needs_attention", "completed", "failed")
REASON_CHARS = 500
ARGS_CHARS = 300


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing to tell: its event name, when it happened, and the body to send."""

    event: str
    at: float
    body: str


def _cut(text: str, limit: int) -> str:
    text = shown(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _body(kind: str, at: float, data: Mapping[str, Any]) -> str:
    payload = {"type": EVENT_TYPES[kind], "timestamp": iso(at).replace("+00:00", "Z"),
               "data": dict(data)}  # fmt: skip
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _agent(state: State) -> dict[str, Any]:
    return {
        "agent_id": state.agent_id,
        "name": _cut(state.name, 200),
        "tenant": state.tenant,
        "status": state.status,
        "version": state.version,
    }


def _args_summary(args: Any) -> str:
    try:
        text = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(args)
    return _cut(text, ARGS_CHARS)


def notices(events: Sequence[Event], before: str, state: State) -> list[Notice]:
    """The notices of appending ``events`` to an agent whose status was ``before`` and
    whose state after them is ``state``."""
    out: list[Notice] = []
    for ev in events:
        if ev.kind != Kind.APPROVAL_REQUESTED:
            continue
        d = ev.data
        approval = {
            "approval_id": str(d.get("approval_id", "")),
            "call_id": str(d.get("call_id", "")),
            "tool": _cut(str(d.get("tool", "")), 200),
            "args_summary": _args_summary(d.get("args")),
        }
        data = {**_agent(state), "reason": _cut(str(d.get("reason", "")), REASON_CHARS),
                "approval": approval, "seq": ev.seq}  # fmt: skip
        out.append(Notice("approval_requested", ev.at, _body("approval_requested", ev.at, data)))
    # a restore brings a hibernated agent back to the status it slept in, which was
    # told when it was reached: "hibernated" before says nothing of it
    woken = any(ev.kind == Kind.RESTORED for ev in events)
    if events and not woken and state.status != before and state.status in TOLD_STATUSES:
        last = events[-1]
        data = {**_agent(state), "reason": _cut(state.status_reason, REASON_CHARS),
                "previous_status": before, "seq": last.seq}  # fmt: skip
        out.append(Notice(state.status, last.at, _body(state.status, last.at, data)))
    return out
