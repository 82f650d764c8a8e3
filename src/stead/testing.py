"""Fakes for testing code that uses stead: scripted models, a fake clock, event capture.

>>> from stead.testing import scripted, EventCapture
>>> model = scripted([{"remember": {"k": 1}}, {"finish": "done"}])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .clock import FakeClock
from .journal import Event
from .models.scripted import ScriptedModel

__all__ = ["EventCapture", "FakeClock", "ScriptedModel", "scripted"]


def scripted(decisions: Sequence[Any]) -> ScriptedModel:
    """A scripted model from decisions in their YAML short form, given as Python data."""
    return ScriptedModel.from_data(list(decisions), "test script")


class EventCapture:
    """Collects every event an activation commits; pass it as ``on_commit``."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, events: Sequence[Event]) -> None:
        self.events.extend(events)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]
