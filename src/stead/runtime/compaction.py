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

Near the budget, a live model's summary is asked on a thread while the model
is asked for the step's decision (:func:`ask_beside`), and journaled right after
that decision (:func:`land`), which was asked with the turns it replaces.

A resumed agent re-renders from the journaled summary and never asks for it
again; a model that answers "context too long" gets one compaction and one
retry (:func:`compact`, ``force=True``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..canonical import dumps
from ..errors import SteadError
from ..journal import Kind
from ..models.accounting import attempt_fields, usage_fields
from ..models.base import RenderedContext
from ..models.conversation import estimate_tokens
from ..models.summaries import AHEAD, Beside, beside, cut_point, summary_input

if TYPE_CHECKING:
    from .activation import Activation


def context_tokens(context: RenderedContext) -> int:
    """The estimated size of a request for ``context``, in tokens."""
    extra = len(context.system) + len(dumps(list(context.tools)))
    return estimate_tokens(context.messages) + extra // 4


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
    _journal(act, through, summary, failed)
    return act.renderer.render(act.state)


def _journal(act: Activation, through: int, summary: Any, failed: Sequence[Any] = ()) -> None:
    act.emit(
        Kind.CONTEXT_COMPACTED,
        through=through,
        summary=summary.text,
        model=summary.model,
        **usage_fields(act.state.usage, summary.usage),
        # with the requests the model refused as too long, which this one answers
        **attempt_fields([*failed, *summary.attempts]),
    )


def ask_beside(act: Activation, context: RenderedContext) -> Beside | None:
    """Near its budget (:data:`~stead.models.summaries.AHEAD`), a live model's
    conversation is summarized on a thread while the decision is asked."""
    model, transcript = act.model, act.renderer.transcript
    if transcript is None or not getattr(model, "live", False):
        return None
    if _tokens(act, context) <= AHEAD * model.budget():  # type: ignore[attr-defined]
        return None
    return beside(model, transcript, model.keep())  # type: ignore[attr-defined,arg-type]


def land(act: Activation, asked: Beside) -> None:
    """Journal the summary asked beside this step's decision, once it has come
    (after the decision: that was asked with the turns it replaces). One that failed
    is dropped: the compaction is then made when the budget is reached."""
    try:
        summary = asked.summary.result()
    except SteadError:
        return
    transcript = act.renderer.transcript
    # a "too long" answer compacted further meanwhile: this older cut is not used
    if summary.text and transcript is not None and asked.through > transcript.through:
        _journal(act, asked.through, summary)


def _tokens(act: Activation, context: RenderedContext) -> int:
    measure = getattr(act.model, "request_tokens", None)
    return int(measure(context)) if measure is not None else context_tokens(context)
