"""What a spec's ``model`` says: a provider, a model name, and how to reach it.

A spec names its model in one of two forms::

    model: scripted:script.yaml          # offline decisions from a file
    model: openai:gpt-4o-mini            # a provider and a model name
    model: anthropic:claude-sonnet-4-5
    model:                               # the same, with options
      provider: openai                   # openai (the chat-completions wire format,
      name: llama3.1                     #   also Ollama, vLLM, llama.cpp, LiteLLM...)
      base_url: http://127.0.0.1:11434/v1  # or anthropic
      api_key_secret: OLLAMA_KEY         # vault secret (or worker variable) holding the key
      max_tokens: 2048
      temperature: 0.2
      context_window: 32768
      timeout: 120                       # seconds per request
      max_retries: 4                     # 429, 5xx and timeouts, with backoff
      invalid_answers: 3                 # unusable answers in a row before a person is asked
      summarizer: openai:gpt-4o-mini     # a cheaper model for compaction (same forms;
                                         #   default: the model itself)
      compact_at: 0.5                    # compact when a request would pass this share
                                         #   of the window (less max_tokens)
      compact_to: 0.15                   # keeping about this share of newest turns

:func:`parse_model` checks all of it, so a bad option is refused when the spec
is read, before anything is stored; the checked options are stored with the
agent as plain JSON (never a key: only the name of the secret that holds it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from ..errors import SpecError

PROVIDERS = ("openai", "anthropic")
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
}
DEFAULT_KEY_SECRETS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DEFAULT_MAX_TOKENS = 4096
DEFAULT_WINDOW = 128_000
# a long run's requests stay between about a sixth and a half of the window: a step
# costs what the conversation holds, so it is kept well under the model's ceiling
DEFAULT_COMPACT_AT = 0.5
DEFAULT_COMPACT_TO = 0.15
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
_SECRET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_KEYS = (
    "provider",
    "name",
    "base_url",
    "api_key_secret",
    "max_tokens",
    "temperature",
    "context_window",
    "timeout",
    "max_retries",
    "invalid_answers",
    "summarizer",
    "compact_at",
    "compact_to",
)


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """A provider's model, as a spec names it, checked."""

    provider: str
    name: str
    base_url: str
    api_key_secret: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    context_window: int = DEFAULT_WINDOW
    timeout: float = 120.0
    max_retries: int = 4
    invalid_answers: int = 3
    """Unusable answers in a row (text only, an unknown tool, bad arguments)
    after which the agent stops in ``needs_attention``."""
    summarizer: dict[str, Any] | None = None
    """The checked options of the model that writes compaction summaries (None:
    this model itself)."""
    compact_at: float = DEFAULT_COMPACT_AT
    """The share of the room (the window less ``max_tokens``) a request may take
    before the conversation is compacted."""
    compact_to: float = DEFAULT_COMPACT_TO
    """The share of the room the newest turns, kept whole, take after a compaction
    (the summary comes on top)."""

    @property
    def ref(self) -> str:
        """The short form, ``provider:name``, as journaled with each decision."""
        return f"{self.provider}:{self.name}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "max_tokens": (1, 1_000_000, True),
    "temperature": (0, 2, False),
    "context_window": (512, 10_000_000, True),
    "timeout": (1, 3600, False),
    "max_retries": (0, 10, True),
    "invalid_answers": (1, 100, True),
    "compact_at": (0.1, 0.9, False),
    "compact_to": (0.0, 0.45, False),
}
"""Each numeric option's lowest and highest value, and whether it is a whole number."""
_HELP = {
    "provider": "The wire format spoken: openai (also Ollama, vLLM, llama.cpp, LiteLLM) "
    "or anthropic.",
    "name": "The model's name as the provider knows it, e.g. gpt-4o-mini.",
    "base_url": "The provider's endpoint, an http:// or https:// URL (default: the "
    "provider's public API).",
    "api_key_secret": "The vault secret (or worker variable) holding the API key "
    "(default: OPENAI_API_KEY or ANTHROPIC_API_KEY).",
    "max_tokens": "The most tokens of one answer; at most half of context_window.",
    "temperature": "Sampling temperature (default: the provider's).",
    "context_window": "The model's window in tokens; the conversation is compacted to fit it.",
    "timeout": "Seconds one request may take.",
    "max_retries": "Retries of a request after a 429, a 5xx or a timeout, with backoff.",
    "invalid_answers": "Unusable answers in a row after which a person is asked.",
    "summarizer": "A cheaper model that writes compaction summaries, in the same forms "
    "(default: the model itself).",
    "compact_at": "Compact the conversation when a request would take more than this "
    "share of the window less max_tokens.",
    "compact_to": "After compacting, keep about this share of the window less max_tokens "
    "of the newest turns whole; at most half of compact_at.",
}


def provider_model_schema(ref: str) -> dict[str, Any]:
    """JSON Schema of a provider's model, as :func:`parse_model` reads it: text
    ``provider:name`` or a mapping of options; ``ref`` points at this schema itself
    (a summarizer is given in the same forms)."""
    defaults = {f.name: f.default for f in fields(ModelOptions) if f.default not in (None, MISSING)}
    options: dict[str, Any] = {}
    for key in _KEYS:
        prop: dict[str, Any] = {"description": _HELP[key]}
        if key == "provider":
            prop["enum"] = list(PROVIDERS)
        elif key == "name":
            prop |= {"type": "string", "pattern": _NAME.pattern}
        elif key == "base_url":
            prop |= {"type": "string", "pattern": "^https?://"}
        elif key == "api_key_secret":
            prop |= {"type": "string", "pattern": _SECRET.pattern}
        elif key == "summarizer":
            prop["anyOf"] = [{"$ref": ref}, {"type": "null"}]
        else:
            low, high, integer = _BOUNDS[key]
            kind = "integer" if integer else "number"
            prop |= {"type": [kind, "null"] if key == "temperature" else kind}
            prop |= {"minimum": low, "maximum": high}
            if key in defaults:
                prop["default"] = defaults[key]
        options[key] = prop
    return {
        "anyOf": [
            {
                "title": "provider:name",
                "type": "string",
                "pattern": f"^({'|'.join(PROVIDERS)}):",
            },
            {
                "title": "a mapping of options",
                "type": "object",
                "properties": options,
                "required": ["provider", "name"],
                "additionalProperties": False,
            },
        ]
    }


def _fail(problem: str) -> SpecError:
    return SpecError(f"spec field 'model': {problem}")


def _number(data: Mapping[str, Any], key: str) -> Any:
    value = data[key]
    low, high, integer = _BOUNDS[key]
    fits = isinstance(value, int | float) and not isinstance(value, bool)
    if integer and not isinstance(value, int):
        fits = False
    if not fits or not low <= value <= high:
        what = "a whole number" if integer else "a number"
        raise _fail(f"'{key}' must be {what} from {low:g} to {high:g}, got {value!r}")
    return value if integer else float(value)


def parse_model(value: Any) -> ModelOptions:
    """The options of a provider's model, from ``provider:name`` or a mapping."""
    if isinstance(value, str):
        kind, _, named = value.partition(":")
        data: dict[str, Any] = {"provider": kind, "name": named}
    elif isinstance(value, Mapping):
        data = dict(value)
    else:
        raise _fail(f"must be text such as 'openai:MODEL' or a mapping, got {type(value).__name__}")
    unknown = sorted(str(k) for k in data if k not in _KEYS)
    if unknown:
        raise _fail(f"'{unknown[0]}' is not a model option; the options are {', '.join(_KEYS)}")
    provider = str(data.get("provider"))
    if provider not in PROVIDERS:
        raise _fail(
            f"provider {data.get('provider')!r} is not one this stead speaks; use "
            f"{', '.join(PROVIDERS)} (openai also covers Ollama, vLLM, llama.cpp, LiteLLM "
            "and other servers of its wire format), scripted:PATH, or program:NAME for a "
            "model the program running the agent passes to Runtime.run"
        )
    name: Any = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(f"the model name {name!r} is missing or not a model name")
    base_url: Any = data.get("base_url", DEFAULT_BASE_URLS[provider])
    parts = urlsplit(base_url) if isinstance(base_url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise _fail(f"base_url {base_url!r} is not an http:// or https:// URL")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise _fail("base_url must not carry credentials, a query or a fragment")
    secret: Any = data.get("api_key_secret", DEFAULT_KEY_SECRETS[provider])
    if not isinstance(secret, str) or not _SECRET.match(secret):
        raise _fail(f"api_key_secret {secret!r} is not a secret name (letters, digits and '_')")
    opts: dict[str, Any] = {}
    if "max_tokens" in data:
        opts["max_tokens"] = _number(data, "max_tokens")
    if data.get("temperature") is not None:
        opts["temperature"] = _number(data, "temperature")
    if "context_window" in data:
        opts["context_window"] = _number(data, "context_window")
    if "timeout" in data:
        opts["timeout"] = _number(data, "timeout")
    if "max_retries" in data:
        opts["max_retries"] = _number(data, "max_retries")
    if "invalid_answers" in data:
        opts["invalid_answers"] = _number(data, "invalid_answers")
    for key in ("compact_at", "compact_to"):
        if key in data:
            opts[key] = _number(data, key)
    at = opts.get("compact_at", DEFAULT_COMPACT_AT)
    to = opts.get("compact_to", DEFAULT_COMPACT_TO)
    if to * 2 > at:
        raise _fail(
            f"compact_to ({to:g}) must be at most half of compact_at ({at:g}), or each "
            "compaction would leave the conversation close to the next one"
        )
    window = opts.get("context_window", DEFAULT_WINDOW)
    answer = opts.get("max_tokens", DEFAULT_MAX_TOKENS)
    if answer * 2 > window:
        raise _fail(
            f"max_tokens ({answer}) must be at most half of context_window ({window}), or "
            "the conversation would be compacted before every decision; lower max_tokens "
            "or give the model's real window"
        )
    if data.get("summarizer") is not None:
        nested = data["summarizer"]
        if isinstance(nested, Mapping) and nested.get("summarizer") is not None:
            raise _fail("a summarizer cannot name a summarizer of its own")
        opts["summarizer"] = parse_model(data["summarizer"]).to_json()
    return ModelOptions(provider, name, base_url.rstrip("/"), secret, **opts)


def options_from_record(record: Mapping[str, Any]) -> ModelOptions:
    """The options stored with an agent (checked again: the store is outside input)."""
    return parse_model(record)
