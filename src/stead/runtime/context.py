"""Rendering the model's context from durable state, deterministically.

The same state and tools always render the same text, byte for byte: no
clock, no randomness, no dictionary-order accidents (everything is sorted or
kept in journal order). The SHA-256 of the rendered text and tool schemas is
journaled with every decision, so a later reader can tell exactly what the
model was shown.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..canonical import dumps, sha256_hex
from ..integrity.handles import hides
from ..journal import Event
from ..models.base import RenderedContext
from ..models.conversation import Transcript, Turn, status_text
from ..state import RECENT_CALLS, State
from ..store.base import Store
from ..tools.base import Tool


def _short(value: Any) -> str:
    # the state already clips calls to CLIP_CHARS; this only turns them into text
    return value if isinstance(value, str) else dumps(value)


def _call_line(c: Mapping[str, Any]) -> str:
    outcome = f"ok: {_short(c.get('output'))}" if c["ok"] else f"error: {c.get('error')}"
    return f"- {c['call_id']} {c['tool']}({_short(c.get('args') or {})}) -> {outcome}"


class Renderer:
    """Renders one agent's contexts; made per activation and dropped with it.

    It remembers what does not change between steps (the tool schemas, the
    text of each recent call) so a step renders only what is new. The output
    is exactly :func:`render`'s.
    """

    def __init__(self, spec: Mapping[str, Any], tools: Mapping[str, Tool]) -> None:
        self.spec = spec
        # the conversation, for a model that asks for one (see follow())
        self.transcript: Transcript | None = None
        self.schemas = [
            {
                "name": t.name,
                "effect": t.effect.value,
                "description": t.description,
                "parameters": dict(t.schema),
            }
            for t in sorted(tools.values(), key=lambda t: t.name)
        ]
        self._schemas_json = dumps(self.schemas)
        # offered the query action: part of what the model is shown, so of the hash
        self.hiding = hides(spec)
        self._actions = '"actions":["query"],' if self.hiding else ""

        self._lines: dict[str, str] = {}
        system = spec.get("instructions") or "(no instructions)"
        self._system = f"# Agent {spec['name']}\n\n## Instructions\n{system}\n"
        self._system_json = dumps(self._system)
        self._prefix = _Hashed(object(), "")

    def _line(self, c: Mapping[str, Any]) -> str:
        line = self._lines.get(c["call_id"])
        if line is None:
            if len(self._lines) > 4 * RECENT_CALLS:
                self._lines.clear()
            line = self._lines[c["call_id"]] = _call_line(c)
        return line

    def follow(self, store: Store, state: State) -> None:
        """Keep the conversation from now on: rebuilt from the journal since its last
        compaction (what a resumed agent was shown, turn for turn), then fed each
        event as it is emitted (:meth:`observe`)."""
        compaction = state.compaction or {}
        self.transcript = Transcript()
        through = int(compaction.get("through", 0))
        if through:
            self.transcript.compact(through, str(compaction.get("summary", "")))
        for ev in store.read_events(state.agent_id, through + 1):
            self.transcript.observe(ev)

    def observe(self, ev: Event) -> None:
        if self.transcript is not None:
            self.transcript.observe(ev)

    def render(self, state: State) -> RenderedContext:
        """Render the context for the agent's next decision."""
        if self.transcript is not None:
            return self._conversation(state)
        spec = self.spec
        lines = [
            f"# Agent {spec['name']}",
            "",
            "## Instructions",
            spec.get("instructions") or "(none)",
        ]
        lines += ["", "## Goals"]
        lines += [f"- [{g['status']}] {g['id']}: {g['description']}" for g in state.goals] or [
            "(none)"
        ]
        lines += ["", "## Memory"]
        lines.append(
            json.dumps(state.memory, sort_keys=True, indent=2, ensure_ascii=False)
            if state.memory
            else "(empty)"
        )
        lines += ["", f"## Recent tool calls ({len(state.recent_calls)} of {state.calls_total})"]
        lines += [self._line(c) for c in state.recent_calls] or ["(none)"]
        if state.notices:
            # refusals of what the agent asked for itself (a grant, an approval...)
            lines += ["", "## Notices"]
            lines += [f"- {n}" for n in state.notices]
        lines += ["", "## Messages"]
        lines += [f"- {m}" for m in state.inbox] or ["(none)"]
        lines += ["", "## Workspace", f"{len(state.manifest)} files"]
        lines += [
            "",
            "## Step",
            f"{state.decisions + 1} of at most {spec.get('limits', {}).get('max_steps', '?')}",
        ]
        text = "\n".join(lines) + "\n"
        # the canonical JSON of {"text": text, "tools": schemas}, built from parts
        hashed = f'{{{self._actions}"text":{dumps(text)},"tools":{self._schemas_json}}}'
        return RenderedContext(
            text=text,
            hash=sha256_hex(hashed),
            step=state.decisions,
            tools=self.schemas,
            hiding=self.hiding,
        )

    def _conversation(self, state: State) -> RenderedContext:
        transcript = self.transcript
        assert transcript is not None
        messages = tuple(transcript.messages(status_text(self.spec, state)))
        final = transcript.final
        # the canonical JSON of {actions?, messages, system, tools}, hashed as it grows:
        # the final turns are hashed once, whatever the conversation's length
        prefix = self._prefix
        if prefix.lineage is not transcript.lineage or prefix.count > final:
            prefix = self._prefix = _Hashed(transcript.lineage, f'{{{self._actions}"messages":[')
        prefix.add(messages[prefix.count : final])
        step = prefix.digest.copy()
        size = prefix.size
        for i, m in enumerate(messages[final:], start=final):
            part = f",{m.encoded}" if i else m.encoded
            step.update(part.encode())
            size += len(part)
        closing = f'],"system":{self._system_json},"tools":{self._schemas_json}}}'
        step.update(closing.encode())
        return RenderedContext(
            text="",
            hash=step.hexdigest(),
            step=state.decisions,
            tools=self.schemas,
            system=self._system,
            messages=messages,
            size=size + len(closing),
            hiding=self.hiding,
            final=final,
            lineage=transcript.lineage,
        )


class _Hashed:
    """The SHA-256 of a conversation's start and its final turns, kept across steps."""

    def __init__(self, lineage: object, start: str) -> None:
        self.lineage = lineage
        self.digest = hashlib.sha256(start.encode())
        self.size = len(start)
        self.count = 0

    def add(self, turns: Sequence[Turn]) -> None:
        for m in turns:
            part = f",{m.encoded}" if self.count else m.encoded
            self.digest.update(part.encode())
            self.size += len(part)
            self.count += 1


def render(state: State, spec: Mapping[str, Any], tools: Mapping[str, Tool]) -> RenderedContext:
    """Render the context for the agent's next decision."""
    return Renderer(spec, tools).render(state)
