"""The OpenAPI 3.1 document of the API, made from the endpoints' own declarations.

Served at ``/v1/openapi.json`` without a token, so that a client (or a tool
such as schemathesis) can learn the API; it says which role each operation
needs, and that every operation but the document itself and ``/v1/health``
takes a bearer token.
"""

from __future__ import annotations

import re
from typing import Any

from .. import __version__
from .app import Endpoint
from .auth import ACTIONS
from .errors import ERROR_SCHEMA

_ERRORS = {
    "400": "the request cannot be used (the message says why)",
    "401": "no valid API token",
    "403": "the token's role does not allow this",
    "404": "no such agent, approval or route in the token's tenant",
    "408": "the body did not arrive in time",
    "409": "the agent's state does not allow it now",
    "413": "the body is over its bound",
    "422": "a journal, archive or snapshot does not hold together (it was altered or is not one)",
    "429": "too many failed authentications from this address, streams open for this "
    "token, or archives being received",
    "502": "a model's provider failed to answer",
    "503": "the store cannot be used now",
}
"""Every status :mod:`stead.server.errors` answers with (but 405, for a method the
document does not list), so that no error answer falls outside the document."""


def _operation(e: Endpoint) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
        for n in re.findall(r"{(\w+)}", e.path)
    ]
    params += [{"name": n, "in": "query", "required": False, "schema": dict(schema)}
               for n, schema in e.query.items()]  # fmt: skip
    ok: dict[str, Any] = {"description": e.summary}
    if e.status != 204:
        ok["content"] = {e.media: {"schema": dict(e.answer)}}
    op: dict[str, Any] = {
        "operationId": re.sub(r"\W+", "_", f"{e.method.lower()}{e.path}").strip("_"),
        "summary": e.summary,
        "description": f"Needs a token whose role is {ACTIONS[e.action]} or above.",
        "tags": [e.tag],
        "parameters": params,
        "responses": {
            str(e.status): ok,
            **{
                code: {
                    "description": why,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                    },
                }
                for code, why in _ERRORS.items()
            },
        },
    }
    if e.raw:
        op["requestBody"] = {
            "required": True,
            "content": {"application/octet-stream": {"schema": dict(e.body or {})}},
        }
    elif e.body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": dict(e.body)}},
        }
    return op


def document(endpoints: list[Endpoint], extra: dict[str, Any]) -> dict[str, Any]:
    """The document for ``endpoints`` and the ``extra`` paths written by hand."""
    paths: dict[str, Any] = {}
    for e in endpoints:
        paths.setdefault(e.path, {})[e.method.lower()] = _operation(e)
    for path, ops in extra.items():
        paths.setdefault(path, {}).update(ops)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "stead",
            "version": __version__,
            "description": "Durable, isolated, governed agents: the API of `stead serve`.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR_SCHEMA},
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"token": []}],
    }
