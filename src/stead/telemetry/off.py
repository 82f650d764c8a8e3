"""Telemetry switched off: one shared :class:`NoTrace` whose hooks do nothing.

This is what every activation gets unless the environment asks for telemetry,
so it must stay the cheapest possible object: no state, no allocation per
hook beyond the model call's generator (a model call must still pass the ask
out and the decision back in).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from ..journal import Event
from ..models.base import Decision, Model
from ..state import State
from .base import Trace

A = TypeVar("A")

_NOTHING: nullcontext[None] = nullcontext()  # reusable: it holds nothing


class NoTrace:
    """A :class:`~.base.Trace` that records nothing."""

    __slots__ = ()

    def activation(self, state: Callable[[], State]) -> AbstractContextManager[None]:
        return _NOTHING

    def observe(self, event: Event, approvals: Mapping[str, Mapping[str, Any]]) -> None:
        pass

    def step(self, number: int) -> None:
        pass

    def model_call(self, model: Model, ask: A) -> Generator[A, Decision, Decision]:
        return (yield ask)

    def tool_call(
        self, tool: str, call_id: str, effect: str | None
    ) -> AbstractContextManager[None]:
        return _NOTHING


NO_TRACE = NoTrace()


class Off:
    """The process's telemetry when no ``OTEL_*`` variable asks for any."""

    enabled = False

    def trace(self, agent_id: str, agent_name: str, tenant: str) -> Trace:
        return NO_TRACE


OFF = Off()
