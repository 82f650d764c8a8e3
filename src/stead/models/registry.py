"""Building the model an agent's stored spec names."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..destinations import PROVIDER_HOSTS, Bound, check_destination
from ..errors import SpecError
from ..state import State
from .anthropic import AnthropicModel
from .base import Model
from .bounded import bounded_transport
from .openai import OpenAIModel
from .options import (
    DEFAULT_BASE_URLS,
    DEFAULT_KEY_SECRETS,
    ModelOptions,
    options_from_record,
)
from .provider import ProviderModel
from .recording import RecordingTransport, ReplayTransport, read_recording
from .scripted import ScriptedModel

KeyLookup = Callable[[str], Bound | None]
"""Opens a vault secret of the agent (agent scope, then tenant scope) by name, with the
hosts it is bound to, or None."""


def model_for(
    spec: Mapping[str, Any],
    vault_key: KeyLookup | None = None,
    *,
    record: Path | None = None,
    requests_made: int = 0,
) -> Model:
    """The model for a stored spec record (see :meth:`stead.spec.AgentSpec.to_record`),
    or for what a ``model_changed`` event set since (:func:`effective_spec`).

    A provider's API key is the vault secret the spec names (``api_key_secret``)
    if ``vault_key`` finds it, and only if it is bound to the host of ``base_url``
    (a secret bound to no host goes only to the provider's own endpoint; see
    :mod:`stead.destinations`; a :class:`SecretError` otherwise), else the
    worker's environment variable of that name where :func:`environment_key`
    allows it, else none (a local server may need none; a service that does
    answers 401, and the agent stops saying what to set). With ``record``, every
    exchange is appended to that file; a ``replay:PATH`` model answers from such a file,
    from its exchange ``requests_made`` on (the requests journaled so far).
    """
    ref = str(spec.get("model", ""))
    kind = ref.partition(":")[0]
    if kind == "scripted":
        if spec.get("script") is None:
            raise SpecError("the agent's scripted model has no stored decisions")
        return ScriptedModel.from_data(spec["script"], ref)
    if kind == "replay":
        path = Path(ref.partition(":")[2])
        opts, exchanges = read_recording(path)
        replay = ReplayTransport(exchanges, path, start=requests_made)
        model = _provider(opts)(opts, None, transport=replay, sleep=lambda _: None)
        if opts.summarizer is not None:  # its exchanges are in the same recording
            summary = options_from_record(opts.summarizer)
            model.summarizer = _provider(summary)(
                summary, None, transport=replay, sleep=lambda _: None
            )
        return model
    if kind == "program":
        raise SpecError(
            f"agent's model {ref!r} is given by the program that runs it: pass it as "
            "Runtime.run(agent_id, model=...); a worker cannot run this agent"
        )
    options = spec.get("model_options")
    if isinstance(options, Mapping):
        opts = options_from_record(options)
        model = _built(opts, vault_key, record)
        if opts.summarizer is not None:
            model.summarizer = _built(options_from_record(opts.summarizer), vault_key, record)
        return model
    raise SpecError(f"model {ref!r} is not one this stead knows; pass a model explicitly")


def effective_spec(spec: Mapping[str, Any], state: State) -> dict[str, Any]:
    """The spec with the model a person set since (``stead model set``), if any."""
    if state.model_override is None:
        return dict(spec)
    return {**spec, **state.model_override}


KEY_ENV = "STEAD_MODEL_KEY_ENV"
"""Comma-separated names of the worker's variables a spec may name as a model's key."""
_LOCAL = ("127.0.0.1", "localhost", "::1")
_WARNED: set[tuple[str, str]] = set()
_log = logging.getLogger("stead.models")


def environment_key(opts: ModelOptions) -> str | None:
    """The model's key from the worker's environment, where the operator allows it.

    A spec is not the operator: it may not name just any variable of the worker
    (the vault key, a cloud credential) and point ``base_url`` at its own server.
    So a variable is used only when it is the provider's usual one
    (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``) and the request goes to that
    provider's own endpoint, or when the operator lists its name in
    ``$STEAD_MODEL_KEY_ENV``; never a ``STEAD_`` variable. Keys in the vault go
    only to the hosts whoever wrote them named.
    """
    name = opts.api_key_secret
    if name.startswith("STEAD_"):
        return None
    allowed = {n.strip() for n in os.environ.get(KEY_ENV, "").split(",") if n.strip()}
    usual = name == DEFAULT_KEY_SECRETS[opts.provider]
    if name in allowed or (usual and opts.base_url == DEFAULT_BASE_URLS[opts.provider]):
        return os.environ.get(name) or None
    if usual and os.environ.get(name) and (name, opts.base_url) not in _WARNED:
        _WARNED.add((name, opts.base_url))  # said once a process, not at every model built
        _log.warning(
            "model %s: $%s is set but not sent: base_url %s is not %s's own endpoint (%s), "
            "and a key from the environment goes only there. To send it to that host, list "
            "it in $%s=%s, or keep it in the vault bound to the host: "
            "stead secret set %s --to %s",
            opts.ref, name, opts.base_url, opts.provider, DEFAULT_BASE_URLS[opts.provider],
            KEY_ENV, name, name, urlsplit(opts.base_url).hostname,
        )  # fmt: skip
    return None


def _built(opts: ModelOptions, vault_key: KeyLookup | None, record: Path | None) -> ProviderModel:
    key = _vault_key(opts, vault_key) if vault_key is not None else None
    key = key or environment_key(opts)
    url = urlsplit(opts.base_url)
    if key and url.scheme == "http" and url.hostname not in _LOCAL:
        raise SpecError(
            f"model {opts.ref}: base_url {opts.base_url} is plain http to another host, and "
            "the API key would cross the network unencrypted; use https"
        )
    transport = None
    if record is not None:
        secrets = {opts.api_key_secret: key} if key else {}
        transport = RecordingTransport(bounded_transport(), record, opts, secrets)
    return _provider(opts)(opts, key, transport=transport)


def check_keys(spec: Mapping[str, Any], vault_key: KeyLookup) -> None:
    """Refuse (:class:`SecretError`) a spec whose model's, or summarizer's, vault key is
    not bound to the host of its ``base_url``: when the agent is made or its model
    set, so a person hears of it then, not at the agent's first decision."""
    options = spec.get("model_options")
    if isinstance(options, Mapping):
        opts = options_from_record(options)
        _vault_key(opts, vault_key)
        if opts.summarizer is not None:
            _vault_key(options_from_record(opts.summarizer), vault_key)


def _vault_key(opts: ModelOptions, vault_key: KeyLookup) -> str | None:
    """The vault's key for ``opts``, if it may go to its ``base_url``; None if the vault
    has none. One bound elsewhere is refused, never replaced by the environment's."""
    found = vault_key(opts.api_key_secret)
    if found is None:
        return None
    where = f"the base_url of model {opts.ref}"
    default = PROVIDER_HOSTS[opts.provider]
    return check_destination(opts.api_key_secret, found, opts.base_url, where, default)


def _provider(opts: ModelOptions) -> type[ProviderModel]:
    return AnthropicModel if opts.provider == "anthropic" else OpenAIModel
