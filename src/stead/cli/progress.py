"""How an agent's work reads in a terminal: the lines ``stead run`` prints as each
step is committed, ``stead trace --follow`` as events arrive, and the details
``stead trace`` adds to each event's summary.

Each line is one line: what a model or a tool wrote is clipped and shown with
its control characters escaped (:func:`stead.summaries.shown`), so a tool's
output of a megabyte or an escape sequence that clears the screen is a short,
harmless line. Lines are :class:`rich.text.Text`, never markup: a tool's
``[red]`` is printed as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich.text import Text

from ..journal import Event, Kind
from ..summaries import shown, summarize

ARGS_WIDTH = 60
"""How much of a call's arguments a progress line shows."""

OUTPUT_WIDTH = 100
"""How much of a tool's output a line shows."""

WORDS_WIDTH = 160
"""How much of the model's words a decision's line shows."""


def clip(text: str, width: int) -> str:
    """``text`` on one line (its runs of white space one space), at most ``width``
    characters, an ellipsis saying where it was cut; escaped as :func:`shown`."""
    flat = " ".join(text.split())
    if len(flat) > width:
        flat = flat[: max(width - 1, 0)] + "…"
    return shown(flat)


def compact(value: Any) -> str:
    """A value as short JSON for one line (a string as itself)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)


def usage_text(usage: Any) -> str:
    """A decision's tokens and spend, as ``1,234 tokens · $0.0012``; empty if unknown."""
    if not isinstance(usage, Mapping) or not usage.get("tokens"):
        return ""
    try:
        tokens, spend = int(float(usage["tokens"])), float(usage.get("spend") or 0)
    except (TypeError, ValueError):
        return ""
    parts = [f"{tokens:,} tokens"]
    if usage.get("input_tokens") is not None and usage.get("output_tokens") is not None:
        parts[0] += f" ({int(usage['input_tokens']):,} in, {int(usage['output_tokens']):,} out)"
    parts.append(f"${spend:.4f}")
    return " · ".join(parts)


def args_text(args: Any) -> str:
    """A call's arguments on one line, each value clipped on its own (so a short
    ``path`` is shown whole beside a long ``content``), the whole within
    :data:`ARGS_WIDTH` and a half."""
    if not isinstance(args, Mapping):
        return clip(compact(args), ARGS_WIDTH)
    parts = [
        f"{shown(str(k))}={clip(json.dumps(v, ensure_ascii=False), 40)}"
        if isinstance(v, str)
        else f"{shown(str(k))}={clip(compact(v), 40)}"
        for k, v in sorted(args.items(), key=lambda kv: len(compact(kv[1])))
    ]
    return clip(", ".join(parts), ARGS_WIDTH * 3 // 2)


def action_text(action: Mapping[str, Any]) -> str:
    """One action of a decision: a tool call with its arguments clipped, or the
    runtime's action with what it carries."""
    if action.get("type") == "tool":
        return f"{action.get('tool')}({args_text(action.get('args', {}))})"
    kind = str(action.get("type"))
    carried = {k: v for k, v in action.items() if k not in ("type", "call_id", "said")}
    return f"{kind} {clip(compact(carried), ARGS_WIDTH)}" if carried else kind


def step_lines(ev: Event, said: str = "") -> list[Text]:
    """The progress lines of one committed event (none for the bookkeeping ones);
    ``said`` is what the model wrote as it made the decision (streamed, not journaled)."""
    d = ev.data
    if ev.kind == Kind.DECISION:
        words = str(d.get("text") or said or "").strip()
        head = f"step {d.get('step')}" + (f": {clip(words, WORDS_WIDTH)}" if words else "")
        cost = usage_text(d.get("usage"))
        lines = [Text(head + (f"  [{cost}]" if cost else ""), style="bold")]
        lines += [Text(f"  → {action_text(a)}") for a in d.get("actions", [])]
        return lines
    if ev.kind == Kind.TOOL_RESULT:
        return [Text(f"  ← {d.get('tool')} {result_text(d)}")]
    if ev.kind == Kind.ANSWER_REFUSED:
        cost = usage_text(d.get("usage"))
        return [
            Text(
                f"step {d.get('step')}: answer refused: {clip(str(d.get('reason')), WORDS_WIDTH)}"
                + (f"  [{cost}]" if cost else ""),
                style="yellow",
            )
        ]
    if ev.kind in (Kind.OUTCOME_UNKNOWN, Kind.STATUS_CHANGED, Kind.FINISH_REJECTED):
        said = summarize(ev) or compact(dict(ev.data))
        return [Text(f"  {ev.kind}: {clip(said, WORDS_WIDTH)}")]
    return []


def result_text(d: Mapping[str, Any]) -> str:
    """A call's result on one line: ok and its output clipped, or its error."""
    if d.get("ok"):
        output = d.get("output")
        return "ok" + (
            f": {clip(compact(output), OUTPUT_WIDTH)}" if output not in (None, "") else ""
        )
    return f"error: {clip(str(d.get('error')), OUTPUT_WIDTH)}"


def trace_detail(ev: Event) -> str:
    """What ``stead trace`` says of ``ev``: its summary, and for a decision its
    tokens and spend, for a tool's result its output clipped, for a refused
    answer why it was refused."""
    line = summarize(ev)
    d = ev.data
    if ev.kind == Kind.DECISION:
        cost = usage_text(d.get("usage"))
        return line + (f"  [{cost}]" if cost else "")
    if ev.kind == Kind.TOOL_RESULT and d.get("ok"):
        output = d.get("output")
        return line + (
            f": {clip(compact(output), OUTPUT_WIDTH)}" if output not in (None, "") else ""
        )
    if ev.kind == Kind.ANSWER_REFUSED:
        cost = usage_text(d.get("usage"))
        return f"step {d.get('step')}: {clip(str(d.get('reason')), 300)}" + (
            f"  [{cost}]" if cost else ""
        )
    return line
