"""Keeping a provider model's conversation inside its window, however long the run.

Before each decision, when the rendered conversation would take more than the
model's budget (:meth:`~stead.models.provider.ProviderModel.budget`, the spec's
``compact_at`` share of its window less its answer), its older turns are
compacted: the model is asked for a summary of them (and of the summary
before), which is journaled as ``context_compacted`` with what it cost, and
from then on shown in place of the turns it covers. The newest turns, the
``compact_to`` share (:meth:`~stead.models.provider.ProviderModel.keep`), are
kept whole, cut at the start of a decision so no call loses its result.
Goals, memory and the instructions are never summarized: they are rendered
from the state, every step.

A resumed agent re-renders from the journaled summary and never asks for it
again; a model that answers "context too long" gets one compaction and one
retry (:func:`compact`, ``force=True``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..canonical import dumps
from ..journal import Kind
from ..models.accounting import attempt_fields, usage_fields
from ..models.base import RenderedContext
from ..models.conversation import Transcript, Turn, estimate_tokens, turn_chars

if TYPE_CHECKING:
    from .activation import Activation

SUMMARY_INPUT_CHARS = 2_000
"""How much of one turn the summarizer is shown (the journal keeps it whole)."""


def context_tokens(context: RenderedContext) -> int:
    """The estimated size of a request for ``context``, in tokens."""
    extra = len(context.system) + len(dumps(list(context.tools)))
    return estimate_tokens(context.messages) + extra // 4


def cut_point(turns: Sequence[Turn], keep: int) -> int | None:
    """The last journal seq to compact so that about ``keep`` tokens of turns stay,
    cut where a decision starts; None if nothing can be compacted."""
    start, chars = len(turns), 0
    while start > 0:  # as estimate_tokens(turns[start - 1 :]) <= keep, summed as it goes
        chars += turn_chars(turns[start - 1])
        if chars // 4 > keep:
            break
        start -= 1
    while start < len(turns) and turns[start].role != "assistant":
        start += 1
    if start >= len(turns):  # even the newest decision is over: keep just it
        start = max((i for i, t in enumerate(turns) if t.role == "assistant"), default=0)
    if start == 0:
        return None
    return turns[start - 1].seq


def summary_input(transcript: Transcript, through: int) -> str:
    """The turns to compact, and the summary before them, as text for the summarizer."""
    lines = []
    if transcript.summary:
        lines.append(f"Summary of the work before this part:\n{transcript.summary}\n")
    lines.append("The work log to summarize:")
    for t in transcript.turns:
        if t.seq > through:
            break
        if t.role == "assistant":
            calls = ", ".join(f"{c.name}({dumps(dict(c.args))})" for c in t.calls)
            lines.append(f"AGENT CALLED: {calls[:SUMMARY_INPUT_CHARS]}")
        elif t.role == "tool":
            what = "FAILED" if t.is_error else "RESULT"
            lines.append(f"{what} of {t.call_id}: {t.text[:SUMMARY_INPUT_CHARS]}")
        else:
            lines.append(f"TOLD: {t.text[:SUMMARY_INPUT_CHARS]}")
    return "\n".join(lines)


def compact(
    act: Activation,
    context: RenderedContext,
    *,
    force: bool = False,
    failed: Sequence[Any] = (),
) -> RenderedContext:
    """The context to ask with: ``context``, or after a compaction if it is over budget."""
    transcript = act.renderer.transcript
    budget = getattr(act.model, "budget", None)
    if transcript is None or budget is None:
        return context
    if not force and _tokens(act, context) <= budget():
        return context
    # told the request is too long, keep only the newest decision whole
    keep = getattr(act.model, "keep", None)
    kept = keep() if keep is not None else budget() // 3
    through = cut_point(transcript.turns, 0 if force else kept)
    if through is None:
        return context
    summary = act.model.summarize(summary_input(transcript, through))  # type: ignore[attr-defined]
    act.emit(
        Kind.CONTEXT_COMPACTED,
        through=through,
        summary=summary.text,
        model=summary.model,
        **usage_fields(act.state.usage, summary.usage),
        # with the requests the model refused as too long, which this one answers
        **attempt_fields([*failed, *summary.attempts]),
    )
    return act.renderer.render(act.state)


def _tokens(act: Activation, context: RenderedContext) -> int:
    measure = getattr(act.model, "request_tokens", None)
    return int(measure(context)) if measure is not None else context_tokens(context)
