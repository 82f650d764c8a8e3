"""Handles: untrusted text the model never reads, passed into calls by name.

Where a spec hides a tool's untrusted results (``monitors.dataflow.hide``), the
model is shown a handle in place of each untrusted part: ``$h12`` for a whole
result (the tool result journaled at seq 12), ``$h12.0``, ``$h12.1``… for the
untrusted fields of a result whose other fields are system data (the n-th
hidden value, in the order :func:`hide` meets them). The result's event keeps
the whole output and, beside it, what the model was shown (``shown``), so the
conversation is rebuilt from the journal alone.

A model that never reads the text cannot be steered by what it says. It uses
the text in two ways: it passes a handle as an argument of a call (an argument
whose whole value is a handle is replaced by the hidden value at call time, the
replacement journaled with the call, the value keeping its origin), or it asks
about it with the ``query`` action (:mod:`stead.integrity.quarantine`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..canonical import dumps
from ..errors import InvalidAnswer

HANDLE = re.compile(r"^\$h([1-9][0-9]{0,11})(?:\.([0-9]{1,6}))?$")
"""A handle: ``$h`` and the seq of the result, then ``.N`` for its n-th hidden field."""


def hides(spec: Mapping[str, Any]) -> bool:
    """Whether a spec hides some tool's untrusted results from the model."""
    dataflow = (spec.get("monitors") or {}).get("dataflow") or {}
    return isinstance(dataflow, Mapping) and bool(dataflow.get("hide")) and not dataflow.get("off")


def handle_of(value: Any) -> tuple[int, int | None] | None:
    """The result seq and hidden field a handle names, or None for any other value."""
    if not isinstance(value, str):
        return None
    m = HANDLE.match(value)
    if m is None:
        return None
    return int(m.group(1)), None if m.group(2) is None else int(m.group(2))


def hide(output: Any, fields: set[str] | None, seq: int) -> tuple[Any, list[Any]]:
    """What the model is shown of ``output`` (the result at ``seq``), and the values
    hidden from it, in handle order.

    ``fields`` None hides the whole output; otherwise the values under those keys,
    at any depth, are each replaced by a handle.
    """
    if fields is None:
        size = len(output) if isinstance(output, str) else len(dumps(output))
        note = (
            f"[untrusted text, hidden from you as $h{seq} ({size} characters). Pass "
            f'"$h{seq}" as a whole argument of a call to use it, or ask about it with query]'
        )
        return note, [output]
    hidden: list[Any] = []

    def walk(value: Any) -> Any:
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                if k in fields:
                    out[k] = f"$h{seq}.{len(hidden)}"
                    hidden.append(v)
                else:
                    out[k] = walk(v)
            return out
        if isinstance(value, list | tuple):
            return [walk(v) for v in value]
        return value

    return walk(output), hidden


def hidden_value(event_data: Mapping[str, Any], seq: int, part: int | None) -> Any:
    """The value a handle names in the journaled result ``event_data`` (at ``seq``).

    Raises :class:`~stead.errors.InvalidAnswer` (the model is told) when the
    result hid nothing, or not that part.
    """
    hid = event_data.get("hidden")
    if not event_data.get("ok") or not isinstance(hid, Mapping):
        raise InvalidAnswer(f"$h{seq} names no hidden result: use a handle a result showed you")
    fields = hid.get("fields")
    _, values = hide(event_data.get("output"), None if fields is None else set(fields), seq)
    if fields is None:
        if part is not None:
            raise InvalidAnswer(f"$h{seq} is a whole result: it has no part .{part}")
        return values[0]
    if part is None or part >= len(values):
        raise InvalidAnswer(
            f"$h{seq} hid {len(values)} values: name one as $h{seq}.0 to $h{seq}.{len(values) - 1}"
        )
    return values[part]


def substitute(
    args: Mapping[str, Any], resolve: Callable[[int, int | None], Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``args`` with every value that is a whole handle replaced by what it names
    (``resolve(seq, part)``), and which argument held which handle (``to`` or
    ``items.2`` for a list's third value)."""
    used: dict[str, str] = {}

    def walk(value: Any, path: str) -> Any:
        found = handle_of(value)
        if found is not None:
            used[path] = str(value)
            return resolve(*found)
        if isinstance(value, Mapping):
            return {k: walk(v, f"{path}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{path}.{i}") for i, v in enumerate(value)]
        return value

    out = {str(k): walk(v, str(k)) for k, v in args.items()}
    return out, used


def holds_handle(value: Any) -> bool:
    """Whether a handle stands anywhere in ``value`` (JSON data)."""
    if handle_of(value) is not None:
        return True
    if isinstance(value, Mapping):
        return any(holds_handle(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(holds_handle(v) for v in value)
    return False
