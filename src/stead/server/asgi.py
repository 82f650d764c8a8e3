"""The ASGI application of ``stead serve``: the HTTP API and the web page, over one store.

:func:`application` puts the pieces together: the endpoints of :mod:`.api`
and the journal stream of :mod:`.stream` behind tokens (:mod:`.auth`,
:mod:`.app`), and, open to anyone, ``/v1/health`` and the OpenAPI document
(:mod:`.openapi`); and the web page of :mod:`.web`, logged in with a token.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .. import __version__
from . import (
    api_governance,
    api_lifecycle,
    api_memories,
    api_schedules,
    api_upgrades,
    api_webhooks,
    web,
)
from .api import ENDPOINTS
from .app import Endpoint, Server, make_app
from .openapi import document
from .stream import stream

STREAM = Endpoint(
    "GET", "/v1/agents/{agent_id}/stream", "read",
    "Follow an agent's journal (Server-Sent Events; resume with Last-Event-ID), "
    "and its model's text as it is written (event: text, no id)", stream,
    {"type": "string"}, query={"after": {"type": "integer", "minimum": 0}},
    media="text/event-stream",
)  # fmt: skip


def endpoints() -> list[Endpoint]:
    return [
        *ENDPOINTS,
        *api_governance.ENDPOINTS,
        *api_lifecycle.ENDPOINTS,
        *api_webhooks.ENDPOINTS,
        *api_schedules.ENDPOINTS,
        *api_upgrades.ENDPOINTS,
        *api_memories.ENDPOINTS,
        STREAM,
    ]


def api_document() -> dict[str, Any]:
    """The OpenAPI document the server serves at ``/v1/openapi.json``."""
    health = {"get": {"summary": "Whether the server answers", "security": [],
                      "operationId": "get_v1_health",
                      "responses": {"200": {"description": "it does", "content": {
                          "application/json": {"schema": {"type": "object"}}}}}}}  # fmt: skip
    spec = {"get": {"summary": "This document", "security": [], "operationId": "get_v1_openapi",
                    "responses": {"200": {"description": "the OpenAPI document", "content": {
                        "application/json": {"schema": {"type": "object"}}}}}}}  # fmt: skip
    return document(endpoints(), {"/v1/health": health, "/v1/openapi.json": spec})


def application(server: Server) -> Starlette:
    """The ASGI application of ``server``."""
    every = endpoints()
    doc = api_document()

    async def get_health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "version": __version__})

    async def get_document(request: Request) -> JSONResponse:
        return JSONResponse(doc)

    extra = [
        Route("/v1/health", get_health, methods=["GET"]),
        Route("/v1/openapi.json", get_document, methods=["GET"]),
        *web.routes(server),
    ]
    return make_app(server, every, extra)


__all__ = ["Server", "api_document", "application", "endpoints"]
