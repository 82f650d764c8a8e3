"""Building the model an agent's stored spec names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import SpecError
from .base import Model
from .scripted import ScriptedModel


def model_for(spec: Mapping[str, Any]) -> Model:
    """The model for a stored spec record (see :meth:`stead.spec.AgentSpec.to_record`)."""
    ref = str(spec.get("model", ""))
    kind = ref.partition(":")[0]
    if kind == "scripted":
        if spec.get("script") is None:
            raise SpecError("the agent's scripted model has no stored decisions")
        return ScriptedModel.from_data(spec["script"], ref)
    raise SpecError(f"model {ref!r} is not one this stead knows; pass a model explicitly")
