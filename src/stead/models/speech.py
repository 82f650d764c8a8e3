"""A model's text answer: the agent speaking to its person.

Most chat models end a turn with text and no tool call. Such an answer is a
``say`` action (:func:`stead.models.actions.actions_from_calls`), and before
the decision is journaled the spec's ``on_text`` makes it one of the
runtime's own actions, marked ``said`` so every view shows it as the agent's
words rather than a call it made:

* ``wait`` (the default): a ``wait_for_input`` whose prompt is the text; the
  agent waits for its person's reply (``stead send``, ``POST
  /v1/agents/{id}/input``), which its conversation then shows;
* ``finish``: a ``finish`` whose summary is the text: a claim, checked as any
  finish is (goal checks, pending calls, open violations; see
  :mod:`stead.integrity.completion`), never accepted on the model's word;
* ``refuse``: the answer is refused (:class:`~stead.errors.InvalidAnswer`) and
  the model told to call tools, for specs that want tool calls only.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidAnswer
from .actions import NO_TOOL
from .base import Decision

WHY_CAP = 4000
"""How many characters of the text beside a decision's calls are journaled."""


def spoken(decision: Decision, on_text: str | None) -> list[dict[str, Any]]:
    """The decision's actions with each ``say`` made what ``on_text`` says (see the module)."""
    out: list[dict[str, Any]] = []
    for action in decision.to_json():
        if action.get("type") != "say":
            out.append(action)
            continue
        text = str(action.get("text") or "")
        if on_text == "refuse":
            raise InvalidAnswer(
                NO_TOOL,
                answer={"text": text[:2000], "calls": []},
                attempts=decision.attempts,
                usage=decision.usage,
            )
        if on_text == "finish":
            out.append({"type": "finish", "summary": text, "said": True})
        else:
            out.append({"type": "wait_for_input", "prompt": text, "said": True})
    return out
