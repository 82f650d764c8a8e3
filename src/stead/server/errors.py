"""Errors as the server answers them: a status, a stable code, the CLI's own words.

Every answer that is not a success is ``{"error": {"code": CODE, "message":
TEXT}}``. The code is the snake-case name of the :mod:`stead.errors` class
(``not_found``, ``lease_held``, ``governance_error``…), or one of the server's
own (:data:`OWN`), so a client can branch on it; the message is the one the
command line prints, saying what went wrong and what to do, with each command
it suggests told as the API route that does it (:func:`for_http`).
"""

from __future__ import annotations

import re

from starlette.responses import JSONResponse

from .. import errors

STATUS: list[tuple[type[errors.SteadError], int]] = [
    (errors.NotFound, 404),
    (errors.LeaseHeld, 409),
    (errors.ConcurrencyError, 409),
    (errors.SnapshotConsumed, 409),
    (errors.StoreUnusable, 503),
    (errors.SchemaTooNew, 503),
    (errors.StoreError, 503),
    (errors.PolicyError, 400),
    (errors.GovernanceError, 409),
    (errors.ResolveError, 409),
    (errors.IntegrityError, 422),
    (errors.SecretError, 400),
    (errors.SpecError, 400),
    (errors.ScriptError, 400),
    (errors.ToolError, 400),
    (errors.UsageError, 400),
    (errors.ModelError, 502),
]
"""The first class an error is an instance of gives its status (most specific first)."""

OWN = {
    "unauthenticated": 401,
    "forbidden": 403,
    "bad_request": 400,
    "too_many_attempts": 429,
    "too_many_streams": 429,
    "too_many_uploads": 429,
    "body_too_large": 413,
    "body_too_slow": 408,
    "method_not_allowed": 405,
    "no_such_route": 404,
}


def code_of(exc: errors.SteadError) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()


def problem(
    code: str, message: str, status: int | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error answer with the server's own ``code`` (see :data:`OWN`)."""
    return JSONResponse(
        {"error": {"code": code, "message": message}},
        status_code=status or OWN[code],
        headers=headers,
    )


def status_of(exc: errors.SteadError) -> int:
    return next((s for cls, s in STATUS if isinstance(exc, cls)), 400)


_ID = r"([A-Za-z0-9_.\-{}]+)"
_ROUTES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(pattern), route)
    for pattern, route in (
        (r"`stead ls`", "GET /v1/agents"),
        (r"`stead approvals`", "GET /v1/approvals"),
        (r"`stead snapshots AGENT`", "GET /v1/agents/{agent_id}/snapshots"),
        (rf"`stead snapshots {_ID}`", r"GET /v1/agents/\1/snapshots"),
        (rf"`stead resume {_ID}`", r"POST /v1/agents/\1/run"),
        (rf"`stead wake {_ID}`", r"POST /v1/agents/\1/wake"),
        (rf"`stead show {_ID}`", r"GET /v1/agents/\1"),
        (rf"`stead trace {_ID}`", r"GET /v1/agents/\1/events"),
        (rf"`stead scope {_ID}`", r"GET /v1/agents/\1/scope"),
        (rf"`stead audit verify {_ID}`", r"GET /v1/agents/\1/audit"),
        (rf"`stead check {_ID}`", r"GET /v1/agents/\1/check"),
        (r"`stead model set`", "PUT /v1/agents/{agent_id}/model"),
        (r"`stead approve`", "POST /v1/approvals/{approval_id}/approve"),
        (r"`stead send`", "POST /v1/agents/{agent_id}/messages"),
    )
]
"""The command-line hints in errors' words, and the API route an HTTP caller uses instead."""


def for_http(message: str) -> str:
    """``message`` with each command it suggests told as the API route that does it."""
    for pattern, route in _ROUTES:
        message = pattern.sub(route, message)
    return message


def from_error(exc: errors.SteadError, message: str | None = None) -> JSONResponse:
    text = str(exc) if message is None else message
    return problem(code_of(exc), for_http(text), status_of(exc))


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}
