"""The scripted model: deterministic, offline decisions from a YAML list.

It returns the n-th decision when the agent has recorded n decisions, so it
keeps no state of its own and a resumed agent picks up exactly where its script
left off. It is the default for demos and tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ModelError, ScriptError
from ..yamlsafe import load_yaml, read_text
from .base import Decision, RenderedContext, parse_decision


def read_script(path: str | Path, what: str = "script") -> Any:
    """The plain data of a script file, read bounded (:mod:`stead.yamlsafe`)."""
    p = Path(path)
    return load_yaml(read_text(p, what, ScriptError), f"{what} {p}", ScriptError)


class ScriptedModel:
    """Replays a fixed list of decisions, indexed by the agent's decision count."""

    def __init__(self, decisions: Sequence[Decision], name: str = "scripted") -> None:
        self.decisions = list(decisions)
        self.name = name

    @classmethod
    def from_data(cls, data: Any, source: str = "script") -> ScriptedModel:
        if not isinstance(data, list):
            raise ScriptError(
                f"{source}: a script is a YAML list of decisions, got {type(data).__name__}"
            )
        return cls(
            [parse_decision(item, f"{source}: decision {i + 1}") for i, item in enumerate(data)]
        )

    @classmethod
    def from_yaml(cls, text: str, source: str = "script") -> ScriptedModel:
        return cls.from_data(load_yaml(text, source, ScriptError), source)

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        return cls.from_data(read_script(path), str(path))

    def decide(self, context: RenderedContext) -> Decision:
        if context.step < 0:
            raise ModelError(f"step {context.step} is not a step; steps count from 0")
        if context.step >= len(self.decisions):
            raise ModelError(
                f"the script has {len(self.decisions)} decisions and all have "
                "been used; add decisions to the script or end it with finish"
            )
        return self.decisions[context.step]
