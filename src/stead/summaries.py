"""One line of text for people about each journal event: ``stead trace`` and the web
page's timeline say the same thing.

Who allowed a call, under which policy version and approval, is part of the
line (the audit a person reads); a finish or a question that repeats untrusted
text says so. What a model, a tool or an MCP server wrote is shown with its
control characters escaped (:func:`shown`), never as a terminal would obey them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .clock import iso
from .governance.grants import describe
from .journal import Event

_UNSEEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """``text`` with what a terminal would obey or a reader not see written out as
    escapes: control characters (an ESC that clears a screen) and the marks that
    turn text around (RLO makes ``evil\u202etxt.exe`` read ``evilexe.txt``). Only
    lines and tabs are left as they are. The journal keeps what came; this is
    how people are shown it."""
    return _UNSEEN.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def summarize(ev: Event) -> str:
    """One line for people about ``ev``: what it did, and who allowed it (written
    :func:`shown`)."""
    return shown(_summary(ev))


def _summary(ev: Event) -> str:
    d = ev.data
    if ev.kind == "decision":
        parts = []
        for a in d["actions"]:
            said = "said (text, no tool call)" if a.get("said") else a["type"]
            parts.append(f"{a['tool']}" if a["type"] == "tool" else said)
        why = f' — "{_clip(str(d["text"]))}"' if d.get("text") else ""
        return f"step {d['step']}: " + ", ".join(parts) + why
    if ev.kind in ("tool_intent", "tool_result", "outcome_unknown", "reconciled", "call_resolved"):
        extra = ""
        if ev.kind == "tool_result":
            extra = " ok" if d.get("ok") else f" error: {d.get('error')}"
            if d.get("rerun"):
                extra += " (re-run after a crash)"
            if d.get("hidden"):
                extra += " (hidden from the model: shown as handles)"
        elif ev.kind == "reconciled":
            extra = f" → {d.get('verdict')}"
        elif ev.kind == "call_resolved":
            extra = f" as {d.get('resolution')} by {d.get('by')}"
        verdict = d.get("verdict")
        if isinstance(verdict, Mapping) and verdict.get("decision") == "allow":
            extra += f" ({_verdict(verdict)})"
        if d.get("handles"):
            extra += (
                " (handles put in: "
                + ", ".join(f"{arg} = {h}" for arg, h in sorted(d["handles"].items()))
                + ")"
            )
        allowed = (d.get("provenance") or {}).get("allowed_by")
        if allowed:
            extra += f" (untrusted values let in by {allowed})"
        return f"{d.get('call_id')} {d.get('tool', '')}{extra}"
    if ev.kind == "workspace_restored":
        return "rolled back: " + ", ".join(d.get("paths", []))
    if ev.kind == "status_changed":
        return f"{d.get('status')}: {d.get('reason', '')}"
    if ev.kind == "memory_written":
        return ", ".join(sorted(d.get("values", {})))
    if ev.kind in ("goal_pushed", "goal_completed"):
        return str(d.get("id"))
    if ev.kind == "mcp_tools_listed":
        names = ", ".join(str(t.get("name")) for t in d.get("tools", []))
        changed = "changed its tools: " if d.get("changed") else ""
        return f"MCP server {d.get('server')} {changed}{names}"
    if ev.kind == "query_answered":
        asked = f"{d.get('handle')}: {_clip(str(d.get('question', '')))}"
        if d.get("ok"):
            return f"{asked} → {_clip(json.dumps(d.get('answer')))}"
        return f"{asked} → refused: {d.get('error')}"
    if ev.kind == "flow_allowed":
        a = d.get("allowance") or d.get("asked") or {}
        flow = f"{a.get('from', a.get('source'))} → {a.get('to', a.get('target'))}"
        if not d.get("ok"):
            return f"{flow} refused: {d.get('error')}"
        args = f" ({', '.join(a['args'])})" if a.get("args") else ""
        return f"{a.get('id')} {flow}{args}, {a.get('uses')} use(s)"
    if ev.kind == "finish_claimed":
        return str(d.get("summary", "")) + _answer_mark(d)
    if ev.kind.startswith("schedule_"):
        return _schedule_summary(ev.kind, d)
    if ev.kind in ("memory_saved", "memory_corrected", "memory_forgotten"):
        where = " (shared)" if d.get("shared") else ""
        text = f": {_clip(str(d['text']))}" if "text" in d else ""
        return f"{d.get('memory_id')}{where} [{d.get('source')}] by {d.get('by')}{text}"
    if ev.kind in ("input_received", "input_requested"):
        said = "the agent says: " if d.get("said") else ""
        return said + str(d.get("text", d.get("prompt", ""))) + _answer_mark(d)
    return _governance_summary(ev.kind, d)


def _schedule_summary(kind: str, d: Mapping[str, Any]) -> str:
    if kind == "schedule_set":
        return f"{d.get('schedule_id')} {d.get('when')} by {d.get('by')}"
    if kind == "schedule_changed":
        return f"{d.get('schedule_id')} {d.get('change')} by {d.get('by')}"
    return f"{d.get('schedule_id')} due {iso(float(d.get('due', 0)))}, made by {d.get('by')}"


def _clip(text: str, most: int = 200) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _answer_mark(d: Mapping[str, Any]) -> str:
    """What a trace line says of an answer to a person that repeats untrusted text."""
    seen = d.get("provenance") or {}
    marks = []
    if seen.get("source") == "untrusted":
        marks.append(f"repeats untrusted text from event {', '.join(map(str, seen['from']))}")
    if seen.get("withheld"):  # what the person was not shown, for them to read here
        held = (f"{w['value']} (event {w['from']})" for w in seen["withheld"])
        marks.append(f"withheld: {', '.join(held)}")
    if seen.get("approval"):
        marks.append(f"a person saw it first ({seen['approval']})")
    return f"  [{'; '.join(marks)}]" if marks else ""


def _verdict(v: Mapping[str, Any]) -> str:
    parts = [f"allowed by {v.get('grant') or 'no grant'}", f"policy v{v.get('policy_version')}"]
    if v.get("approval"):
        parts.append(f"approval {v['approval']}")
    return ", ".join(parts)


def _governance_summary(kind: str, d: Mapping[str, Any]) -> str:
    """Who allowed what, under which policy version: the audit lines of ``stead trace``."""
    if kind == "grant_added":
        g = d["grant"]
        return f"{g['id']} {describe(g)} by {g.get('by')}"
    if kind == "grant_revoked":
        return f"{d['grant']} by {d.get('by')}: {d.get('reason', '')}"
    if kind == "autonomy_changed":
        what = f"tool {d['tool']}" if d.get("tool") else "agent"
        return f"{what} → {d['level']} by {d.get('by')}"
    if kind == "approval_requested":
        return f"{d['approval_id']} {d['tool']} (policy v{d['policy_version']}): {d['reason']}"
    if kind == "approval_granted":
        return f"{d['approval_id']} by {d['by']} until {iso(d['valid_until'])}"
    if kind in ("approval_denied", "approval_lapsed"):
        return f"{d['approval_id']}: {d.get('reason', '')}" + (
            f" (by {d['by']})" if d.get("by") else ""
        )
    if kind in ("proposal_recorded", "proposal_accepted"):
        return f"{d['proposal_id']} {d.get('tool', '')}"
    if kind == "governance_refused":
        return f"{d['type']}: {d['reason']}"
    if kind in ("message_received", "message_refused"):
        who = d.get("from") or d.get("claimed_from")
        return f"{d.get('message')} from {who}" + (f": {d['reason']}" if d.get("reason") else "")
    if kind in ("delegated", "message_sent"):
        return f"to {d.get('to')}: " + ("ok" if d.get("ok") else f"error: {d.get('error')}")
    if kind == "identity_created":
        return f"ed25519 {d['public_key'][:16]}…"
    if kind == "spec_upgraded":
        what = "rolled back" if d.get("rollback") else "upgraded"
        changed = ", ".join(d.get("changed") or ()) or "nothing"
        why = f": {d['reason']}" if d.get("reason") else ""
        return f"spec {what} {d['from'][:12]} → {d['to'][:12]} ({changed}) by {d.get('by')}{why}"
    return ""
