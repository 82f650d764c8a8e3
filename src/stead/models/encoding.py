"""A request's body, encoded once per turn rather than once per step.

A provider's model is sent the whole conversation at every step, and the
conversation only grows between compactions: what was sent at one step is sent
again, unchanged, at the next. So a wire format keeps the JSON of every turn
that can no longer change (the context's ``final`` turns of its ``lineage``,
see :class:`~stead.models.base.RenderedContext`) and, at each step, encodes
only the turns after them and the status, and joins the parts. A step then
costs what is new in it, not the conversation's length; the bytes sent are the
ones :func:`json.dumps` of the whole request would give, up to whitespace.

:attr:`Growing.encoded` counts the bytes each request encoded afresh, which
tests pin: it must not grow with the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .base import RenderedContext
from .conversation import Turn


class Growing:
    """What a wire format keeps of one conversation's encoding between steps."""

    def __init__(self) -> None:
        self.lineage: object | None = None
        self.count = 0
        """How many of the context's messages are kept encoded."""
        self.encoded = 0
        """The bytes of JSON the last request encoded afresh."""
        self._tools: tuple[object, bool, bytes] | None = None

    def begin(self, context: RenderedContext) -> Sequence[Turn]:
        """Start a request for ``context``: the final turns not yet kept, in order
        (all of them, after :meth:`reset`, when the conversation is not the one kept)."""
        self.encoded = 0
        if (
            context.lineage is None
            or context.lineage is not self.lineage
            or context.final < self.count
        ):
            self.reset()
            self.lineage, self.count = context.lineage, 0
        turns = context.messages[self.count : context.final]
        self.count = max(self.count, context.final)
        return turns

    def reset(self) -> None:
        """Forget what was kept (a wire format clears its own parts too)."""

    def json(self, value: Any) -> bytes:
        """``value`` as JSON bytes, counted in :attr:`encoded`."""
        out = json.dumps(value, ensure_ascii=False).encode()
        self.encoded += len(out)
        return out

    def fields(self, value: Mapping[str, Any]) -> bytes:
        """The members of a JSON object, without its braces, to splice into a body."""
        return self.json(dict(value))[1:-1] if value else b""

    def tools(self, context: RenderedContext, make: Any) -> bytes:
        """The offered tools' JSON, made by ``make()`` once per list of tool schemas
        (a renderer keeps one list for an activation)."""
        kept = self._tools
        if kept is None or kept[0] is not context.tools or kept[1] != context.hiding:
            # the schemas object is held here, so its id cannot be reused meanwhile
            kept = self._tools = (context.tools, context.hiding, self.json(make()))
        return kept[2]
