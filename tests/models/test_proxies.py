"""The in-flight worker's session reads the environment's proxies once, not per request."""

from __future__ import annotations

from typing import Any, cast

import pytest

from stead.models.http import proxy_for, read_proxies


class Session:
    """Stands for an aiohttp session: only its identity matters here."""


def test_proxies_are_read_once_per_session_and_no_proxy_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.local:3128")
    monkeypatch.setenv("NO_PROXY", "models.internal")
    session = cast(Any, Session())
    read_proxies(session)
    assert proxy_for(session, "https://api.example.com/v1/chat") == "http://proxy.local:3128"
    assert proxy_for(session, "https://models.internal/v1/chat") is None
    assert proxy_for(session, "http://api.example.com/v1/chat") is None  # no HTTP_PROXY
    monkeypatch.setenv("HTTPS_PROXY", "http://elsewhere:1")
    assert proxy_for(session, "https://api.example.com/v1/chat") == "http://proxy.local:3128"
    assert proxy_for(cast(Any, Session()), "https://api.example.com/v1") is None  # never read
