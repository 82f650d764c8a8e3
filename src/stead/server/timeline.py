"""An agent's journal as the web page's timeline shows it: a line per event, with a
tone people can scan (an effect, a person's word, a wait, something wrong)."""

from __future__ import annotations

from dataclasses import dataclass

from ..journal import Event
from ..summaries import summarize

_TONES = {
    "tool_result": "effect", "tool_intent": "effect", "reconciled": "effect",
    "approval_requested": "wait", "input_requested": "wait", "status_changed": "status",
    "approval_granted": "person", "approval_denied": "bad", "approval_lapsed": "bad",
    "input_received": "person", "grant_added": "person", "grant_revoked": "person",
    "violation": "bad", "outcome_unknown": "bad", "governance_refused": "bad",
    "workspace_restored": "bad", "finish_claimed": "done", "completion_certified": "done",
    "spec_upgraded": "person",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Line:
    seq: int
    at: float
    kind: str
    text: str
    tone: str
    files: tuple[str, ...]
    """The workspace's files a call changed (a tool result's manifest changes)."""


def describe(ev: Event) -> Line:
    tone = _TONES.get(ev.kind, "plain")
    if ev.kind == "tool_result" and not ev.data.get("ok", True):
        tone = "bad"
    files: tuple[str, ...] = ()
    if ev.kind == "tool_result":
        changed = ev.data.get("changed") or {}
        removed = ev.data.get("removed") or []
        files = tuple(sorted(changed)) + tuple(f"{p} (removed)" for p in sorted(removed))
    return Line(ev.seq, ev.at, ev.kind, summarize(ev), tone, files)
