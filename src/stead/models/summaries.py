"""A compaction's summary: which turns it covers, what the summarizer reads, and
asking it beside a decision.

:func:`cut_point` chooses where a compaction cuts the conversation (always where
a decision starts, so no call loses its result), :func:`summary_input` is the
text the summarizer is shown. A live provider's model can be asked for the
summary on a thread of its own while it is asked for a decision
(:func:`beside`): the step then waits for whichever answers last, not for one
after the other, and the summary is journaled in that step, with what it cost.
A recorded or replayed model is asked one request after the other, in the order
its recording keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..canonical import dumps
from .conversation import Transcript, Turn, turn_chars

if TYPE_CHECKING:
    from .provider import ProviderModel, Summary

AHEAD = 0.9
"""Past this share of its budget a conversation's summary is asked beside the decision."""

_ASKING = ThreadPoolExecutor(max_workers=8, thread_name_prefix="stead-summary")


@dataclass(frozen=True, slots=True)
class Beside:
    """A summary of the turns up to journal seq ``through``, being asked."""

    through: int
    summary: Future[Summary]


def beside(model: ProviderModel, transcript: Transcript, keep: int) -> Beside | None:
    """Ask ``model`` for a summary keeping about ``keep`` tokens of turns, on a
    thread; None when nothing can be compacted."""
    through = cut_point(transcript.turns, keep)
    if through is None:
        return None
    return Beside(through, _ASKING.submit(model.summarize, summary_input(transcript, through)))


SUMMARY_INPUT_CHARS = 2_000
"""How much of one turn the summarizer is shown (the journal keeps it whole)."""


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
