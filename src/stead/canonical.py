"""Canonical JSON: the one byte form that hashes are computed over.

Keys sorted, no insignificant white space, UTF-8, and floats refused where they
would not round-trip. Everything stead stores is JSON; nothing is pickled,
because a model can influence what is stored.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def dumps(value: Any) -> str:
    """Serialise ``value`` canonically."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(data: bytes | str) -> str:
    """Hex SHA-256 of bytes, or of a string's UTF-8 encoding."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """Hex SHA-256 of the canonical JSON of ``value``."""
    return sha256_hex(dumps(value))


def loads(text: str | bytes) -> Any:
    """Parse JSON text."""
    return json.loads(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is not a finite number")
    return value


def strict_loads(text: str | bytes) -> Any:
    """Parse JSON from outside (a model's answer, a recording), refusing NaN,
    infinities and numbers too large for a float, which :func:`dumps` could not
    write back: hostile input never reaches the journal in a form it cannot hold.
    Deep nesting raises RecursionError (the caller's to catch)."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
