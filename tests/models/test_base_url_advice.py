"""What stead says about a model's base_url: a key in the environment it will not send
there (once), and a 404 from a base_url without /v1 or with it twice."""

from __future__ import annotations

import logging

import pytest

from stead.errors import ModelError
from stead.models import registry
from stead.models.endpoints import not_found_hint
from stead.models.options import parse_model

from .fake_servers import FakeServer, Reply
from .test_providers import CONTEXT, PROVIDERS, error, make


def test_a_set_key_not_sent_to_another_host_is_said_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-0123456789")
    monkeypatch.setattr(registry, "_WARNED", set())
    opts = parse_model({"provider": "openai", "name": "m", "base_url": "https://proxy.example/v1"})
    with caplog.at_level(logging.WARNING, logger="stead.models"):
        assert registry.environment_key(opts) is None
        assert registry.environment_key(opts) is None
    (said,) = [r.getMessage() for r in caplog.records]
    assert "$OPENAI_API_KEY is set but not sent: base_url https://proxy.example/v1" in said
    assert "STEAD_MODEL_KEY_ENV=OPENAI_API_KEY" in said
    assert "stead secret set OPENAI_API_KEY --to proxy.example" in said
    assert "sk-env" not in said
    caplog.clear()
    own = parse_model({"provider": "openai", "name": "m"})
    with caplog.at_level(logging.WARNING, logger="stead.models"):
        assert registry.environment_key(own) == "sk-env-0123456789"
    assert caplog.records == []


@pytest.mark.parametrize(
    ("provider", "path", "advice"),
    [
        ("anthropic", "", "it should end in /v1 as anthropic's own does (https://api.anthropic.com/v1)"),
        ("anthropic", "/v1/v1", "it holds /v1 twice: drop one"),
        ("openai", "", "it should end in /v1 as openai's own does"),
    ],
)  # fmt: skip
def test_a_404_says_how_to_fix_the_base_url(
    server: FakeServer, provider: str, path: str, advice: str
) -> None:
    model, _ = make(provider, server.url.removesuffix("/v1") + path)
    server.queue(error(provider, 404, "Not Found"))
    with pytest.raises(ModelError) as got:
        model.decide(CONTEXT)
    endpoint = "/messages" if provider == "anthropic" else "/chat/completions"
    assert "HTTP 404" in str(got.value) and advice in str(got.value)
    assert f"stead sent the request to {server.url.removesuffix('/v1')}{path}{endpoint}" in str(
        got.value
    )
    assert server.seen[0].path == f"{path}{endpoint}"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_other_errors_are_left_as_they_are(server: FakeServer, provider: str) -> None:
    model, _ = make(provider, server.url)
    server.queue(Reply(400, {"error": {"message": "bad"}}))
    with pytest.raises(ModelError) as got:
        model.decide(CONTEXT)
    assert "stead sent the request" not in str(got.value)
    assert "end in /v1" in not_found_hint(provider, "https://example.com")
