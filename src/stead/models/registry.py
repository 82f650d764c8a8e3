"""Building the model an agent's stored spec names."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import SpecError
from .anthropic import AnthropicModel
from .base import Model
from .openai import OpenAIModel
from .options import options_from_record
from .provider import ProviderModel
from .scripted import ScriptedModel

KeyLookup = Callable[[str], str | None]
"""Opens a vault secret of the agent (agent scope, then tenant scope) by name, or None."""


def model_for(spec: Mapping[str, Any], vault_key: KeyLookup | None = None) -> Model:
    """The model for a stored spec record (see :meth:`stead.spec.AgentSpec.to_record`).

    A provider's API key is the vault secret the spec names (``api_key_secret``)
    if ``vault_key`` finds it, else the worker's environment variable of that
    name, else none (a local server may need none; a service that does answers
    401, and the agent stops saying what to set).
    """
    ref = str(spec.get("model", ""))
    kind = ref.partition(":")[0]
    if kind == "scripted":
        if spec.get("script") is None:
            raise SpecError("the agent's scripted model has no stored decisions")
        return ScriptedModel.from_data(spec["script"], ref)
    options = spec.get("model_options")
    if isinstance(options, Mapping):
        opts = options_from_record(options)
        key = vault_key(opts.api_key_secret) if vault_key is not None else None
        key = key or os.environ.get(opts.api_key_secret) or None
        cls: type[ProviderModel] = AnthropicModel if opts.provider == "anthropic" else OpenAIModel
        return cls(opts, key)
    if kind == "program":
        raise SpecError(
            f"agent's model {ref!r} is given by the program that runs it: pass it as "
            "Runtime.run(agent_id, model=...); a worker cannot run this agent"
        )
    raise SpecError(f"model {ref!r} is not one this stead knows; pass a model explicitly")
