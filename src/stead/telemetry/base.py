"""What the runtime holds of telemetry: a :class:`Trace` for each activation.

The runtime calls a few hooks (an activation begins and ends, a step runs on,
the model is asked, a tool is called, an event is journaled) and never asks
whether telemetry is on. When it is off, every hook belongs to one shared
object that does nothing (:mod:`.off`), so an agent pays a method call per
hook and nothing else, and no OpenTelemetry module is imported.

The hooks are handed plain values: names, ids, effect classes, the journaled
event (already redacted) and, for a model call, the decision. What a
:class:`Trace` may copy into a span or a metric is listed in :mod:`.names`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from ..journal import Event
from ..models.base import Decision, Model
from ..state import State

A = TypeVar("A")


class Trace(Protocol):
    """One activation's spans and the metrics its events move."""

    def activation(self, state: Callable[[], State]) -> AbstractContextManager[None]:
        """Around an activation that holds the agent's lease, from its recovery to its
        last commit; ``state()`` is the agent's state as the activation ends."""

    def observe(self, event: Event, approvals: Mapping[str, Mapping[str, Any]]) -> None:
        """``event`` was journaled (redacted); ``approvals`` is the state's before it."""

    def step(self, number: int) -> None:
        """The activation acts on the decision of step ``number``."""

    def model_call(self, model: Model, ask: A) -> Generator[A, Decision, Decision]:
        """Yields ``ask`` to whoever answers it (in this thread or on an event loop)
        and returns the decision sent back, measuring the wait."""

    def tool_call(
        self, tool: str, call_id: str, effect: str | None
    ) -> AbstractContextManager[None]:
        """Around one call of a decision, from the gate to its journaled result."""


class Telemetry(Protocol):
    """Telemetry for a process: on or off, decided once (see :mod:`stead.telemetry`)."""

    enabled: bool

    def trace(self, agent_id: str, agent_name: str, tenant: str) -> Trace:
        """A :class:`Trace` for one activation of one agent."""
