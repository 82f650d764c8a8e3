"""Advice on a model's ``base_url`` when its service answers that the path is not there.

stead appends the endpoint's own path to ``base_url``: ``/chat/completions``
for OpenAI's wire format, ``/messages`` for Anthropic's. Both providers'
own base URLs end in ``/v1`` (``https://api.anthropic.com/v1``), so a
``base_url`` without it, or with it twice, gets a 404; :func:`with_hint` says
which and how to fix it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..errors import ModelError
from .options import DEFAULT_BASE_URLS, ModelOptions

_PATHS = {"openai": "/chat/completions", "anthropic": "/messages"}


def not_found_hint(provider: str, base_url: str) -> str:
    """What to change in ``base_url`` when its endpoint answered 404."""
    path = urlsplit(base_url).path.rstrip("/")
    sent = f"{base_url.rstrip('/')}{_PATHS.get(provider, '')}"
    if path.endswith("/v1/v1"):
        fix = f"it holds /v1 twice: drop one ({base_url.rstrip('/')[:-3]})"
    elif not path.endswith("/v1"):
        fix = f"it should end in /v1 as {provider}'s own does ({DEFAULT_BASE_URLS[provider]})"
    else:
        fix = "check that the server serves this path and the model name"
    return (
        f"stead sent the request to {sent}; the base_url is what comes before the "
        f"endpoint, so {fix}"
    )


def with_hint(exc: ModelError, options: ModelOptions) -> ModelError:
    """``exc`` with :func:`not_found_hint` added where the service answered 404."""
    if type(exc) is not ModelError or "HTTP 404" not in str(exc):
        return exc
    hint = not_found_hint(options.provider, options.base_url)
    return ModelError(f"{exc}. {hint}", attempts=exc.attempts)
