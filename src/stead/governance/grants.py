"""Grants: what an agent may call, with which arguments, how often, and until when.

A grant is plain JSON, held in the agent's journal (``grant_added`` /
``grant_revoked`` events) and folded into its state::

    {"id": "gr_...", "tool": "write_file", "args": {"path": {"glob": "src/*"}},
     "max_uses": 10, "valid_from": null, "valid_until": 1767225600.0,
     "by": "alice@host", "reason": "refactor", "delegable": false,
     "delegated_from": null}

``tool`` is a name or a glob (``fs_*``). Each entry of ``args`` constrains one
argument; an argument a grant does not mention is unconstrained, and an
argument it does mention must be present and satisfy it. Constraint kinds:

``glob``
    the value (text) matches a shell-style pattern, e.g. ``src/*``;
``max`` / ``min``
    the value is a number no greater / no smaller;
``one_of``
    the value is one of a list;
``hosts``
    the value is a host name or a URL whose host matches one of the patterns.

:func:`allows` answers "does this grant cover this call now?"; :func:`narrower`
answers "is this proposed grant a subset of that one?", conservatively: when
it cannot be sure, the answer is no. Neither ever widens anything.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from ..errors import GovernanceError

CONSTRAINT_KINDS = ("glob", "max", "min", "one_of", "hosts")
NETWORK = "network"
"""The capability, not a tool: a live grant of exactly this name lets the commands of
the agent's tool calls reach the network. No pattern (``*``) ever grants it."""
_WILD = re.compile(r"[*?\[]")
_FIELDS = (
    "id",
    "tool",
    "args",
    "max_uses",
    "valid_from",
    "valid_until",
    "by",
    "reason",
    "delegable",
    "delegated_from",
)


MAX_VALID_SECONDS = 10 * 365 * 86400
"""The longest validity window a grant or approval may be given: 10 years."""
_LATEST = 253402300799.0
"""The last second of the year 9999: no grant's time may lie beyond it."""


def _fail(where: str, problem: str) -> GovernanceError:
    return GovernanceError(f"{where}: {problem}")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(where, f"must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _fail(where, f"must be a number, got {value!r}")
    return number


def check_valid_for(value: Any, where: str = "valid_for") -> float:
    """A validity window in seconds: above 0 and at most :data:`MAX_VALID_SECONDS`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_VALID_SECONDS
    ):
        raise _fail(
            where,
            f"must be a positive number of seconds, at most 10 years "
            f"({MAX_VALID_SECONDS} s), got {value!r}",
        )
    return float(value)


def parse_constraint(value: Any, where: str) -> dict[str, Any]:
    """One argument constraint, checked; raise with what is allowed."""
    if not isinstance(value, Mapping) or len(value) != 1:
        raise _fail(
            where,
            "must be a mapping with exactly one of "
            f"{', '.join(CONSTRAINT_KINDS)}, e.g. {{glob: 'src/*'}}",
        )
    ((kind, arg),) = value.items()
    if kind not in CONSTRAINT_KINDS:
        raise _fail(where, f"unknown constraint {kind!r}; use one of {', '.join(CONSTRAINT_KINDS)}")
    if kind == "glob":
        if not isinstance(arg, str) or not arg:
            raise _fail(f"{where}.glob", "must be a non-empty pattern")
        return {"glob": arg}
    if kind in ("max", "min"):
        return {kind: _number(arg, f"{where}.{kind}")}
    if not isinstance(arg, list) or not arg:
        raise _fail(f"{where}.{kind}", "must be a non-empty list")
    if kind == "hosts" and not all(isinstance(h, str) and h for h in arg):
        raise _fail(f"{where}.hosts", "must be a list of host names or patterns")
    return {kind: list(arg)}


_CONSTRAINT_SCHEMAS: dict[str, dict[str, Any]] = {
    "glob": {"type": "string", "minLength": 1, "description": "A shell-style pattern the "
             "text must match, e.g. src/*."},
    "max": {"type": "number", "description": "The largest number allowed."},
    "min": {"type": "number", "description": "The smallest number allowed."},
    "one_of": {"type": "array", "minItems": 1, "description": "The values allowed."},
    "hosts": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1},
              "description": "Host name patterns a host or URL must match."},
}  # fmt: skip
_GRANT_HELP = {
    "id": "Filled in when the grant is recorded.",
    "tool": "The tool's name or a pattern of names (fs_*); 'network' lets commands reach "
    "the network.",
    "args": "Constraints on arguments by name, each one of " + ", ".join(CONSTRAINT_KINDS) + ".",
    "max_uses": "How many calls the grant covers (default: no limit).",
    "valid_from": "When the grant starts, in seconds since 1970.",
    "valid_until": "When the grant ends, in seconds since 1970.",
    "valid_for": "How long the grant lasts from the agent's creation, in seconds (at most "
    "10 years).",
    "by": "Filled in with who recorded the grant.",
    "reason": "Why the grant is given, for the audit trail.",
    "delegable": "Whether the agent may hand a narrower part of it to another agent "
    "(default: false).",
    "delegated_from": "Filled in for a delegated grant.",
}
_GRANT_TYPES: dict[str, dict[str, Any]] = {
    "tool": {"type": "string", "minLength": 1},
    "args": {"type": ["object", "null"], "additionalProperties": {"$ref": "#/$defs/constraint"}},
    "max_uses": {"type": ["integer", "null"], "minimum": 1},
    "valid_from": {"type": ["number", "null"], "minimum": 0, "maximum": _LATEST},
    "valid_until": {"type": ["number", "null"], "minimum": 0, "maximum": _LATEST},
    "valid_for": {"type": ["number", "null"], "exclusiveMinimum": 0,
                  "maximum": MAX_VALID_SECONDS},
    "reason": {"type": "string"},
    "delegable": {"type": "boolean", "default": False},
}  # fmt: skip


def constraint_schema() -> dict[str, Any]:
    """JSON Schema of one argument constraint, as :func:`parse_constraint` reads it."""
    return {
        "description": "One constraint on an argument: exactly one of "
        + ", ".join(CONSTRAINT_KINDS)
        + ".",
        "type": "object",
        "properties": {kind: _CONSTRAINT_SCHEMAS[kind] for kind in CONSTRAINT_KINDS},
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
    }


def grant_schema(allowed: tuple[str, ...] = (*_FIELDS, "valid_for")) -> dict[str, Any]:
    """JSON Schema of a grant with the ``allowed`` fields, as :func:`parse_grant` reads
    it; its ``args`` refer to ``#/$defs/constraint`` (:func:`constraint_schema`)."""
    return {
        "type": "object",
        "properties": {
            key: {"description": _GRANT_HELP[key], **_GRANT_TYPES.get(key, {})} for key in allowed
        },
        "required": ["tool"],
        "additionalProperties": False,
    }


def parse_grant(obj: Any, where: str = "grant") -> dict[str, Any]:
    """A grant's fields from YAML, CLI or a delegation, checked and normalised.

    ``id``, ``by`` and ``delegated_from`` are filled in by whoever records the
    grant; here they are only carried over if present.
    """
    if not isinstance(obj, Mapping):
        raise _fail(where, "must be a mapping with at least 'tool'")
    unknown = sorted(set(obj) - set(_FIELDS) - {"valid_for"})
    if unknown:
        raise _fail(f"{where}.{unknown[0]}", f"is not a grant field; use {', '.join(_FIELDS)}")
    tool = obj.get("tool")
    if not isinstance(tool, str) or not tool:
        raise _fail(f"{where}.tool", "must be a tool name or pattern, e.g. write_file or fs_*")
    args = obj.get("args") or {}
    if not isinstance(args, Mapping):
        raise _fail(f"{where}.args", "must map argument names to constraints")
    if tool == NETWORK and (obj.get("args") or obj.get("max_uses") is not None):
        raise _fail(
            f"{where}.tool",
            "a network grant gives the tool's commands the network or not; it cannot "
            "limit hosts or uses. Grant it with only a validity window, and constrain "
            "the arguments of the tool that takes the URL instead",
        )
    max_uses = obj.get("max_uses")
    if max_uses is not None and (
        isinstance(max_uses, bool) or not isinstance(max_uses, int) or max_uses < 1
    ):
        raise _fail(f"{where}.max_uses", f"must be a whole number of at least 1, got {max_uses!r}")
    bounds = {}
    for key in ("valid_from", "valid_until"):
        value = obj.get(key)
        bounds[key] = None if value is None else _number(value, f"{where}.{key}")
        if not 0 <= (bounds[key] or 0) <= _LATEST:
            raise _fail(f"{where}.{key}", "must be a time in seconds between 1970 and 9999")
    if (
        bounds["valid_from"] is not None
        and bounds["valid_until"] is not None
        and bounds["valid_until"] <= bounds["valid_from"]
    ):
        raise _fail(f"{where}.valid_until", "must be after valid_from")
    return {
        "id": str(obj.get("id", "")),
        "tool": tool,
        "args": {
            str(name): parse_constraint(c, f"{where}.args.{name}") for name, c in args.items()
        },
        "max_uses": max_uses,
        "valid_from": bounds["valid_from"],
        "valid_until": bounds["valid_until"],
        "by": str(obj.get("by", "")),
        "reason": str(obj.get("reason", "")),
        "delegable": bool(obj.get("delegable", False)),
        "delegated_from": obj.get("delegated_from"),
    }


_BARE_HOST = re.compile(r"^([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*)(:\d{1,5})?$")


def _host(value: str) -> str:
    """The host a value names: a URL's host, or a bare ``name[:port]``; "" for anything
    else, so text such as ``evil.net/.example.com`` matches no host pattern."""
    if "://" in value:
        try:
            return (urlsplit(value).hostname or "").lower()
        except ValueError:
            return ""
    m = _BARE_HOST.match(value)
    return m.group(1).lower() if m else ""


def satisfies(constraint: Mapping[str, Any], value: Any) -> bool:
    """Whether one argument value meets one constraint."""
    ((kind, arg),) = constraint.items()
    if kind == "glob":
        return isinstance(value, str) and fnmatch.fnmatchcase(value, arg)
    if kind in ("max", "min"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return bool(value <= arg) if kind == "max" else bool(value >= arg)
    if kind == "one_of":
        return any(value == v and type(value) is type(v) for v in arg)
    if kind == "hosts":
        if not isinstance(value, str):
            return False
        host = _host(value)
        return bool(host) and any(fnmatch.fnmatchcase(host, p.lower()) for p in arg)
    return False


def inactive_reason(grant: Mapping[str, Any], now: float) -> str | None:
    """Why the grant cannot be used at ``now`` at all (not yet, no longer, used up), or None."""
    if grant.get("valid_from") is not None and now < grant["valid_from"]:
        return f"grant {grant['id']} is valid only from {_when(grant['valid_from'])}"
    if grant.get("valid_until") is not None and now >= grant["valid_until"]:
        return f"grant {grant['id']} expired at {_when(grant['valid_until'])}"
    if grant.get("max_uses") is not None and grant.get("uses", 0) >= grant["max_uses"]:
        return f"grant {grant['id']} has been used all {grant['max_uses']} times"
    return None


def network_grant(grants: Mapping[str, Mapping[str, Any]], now: float) -> str | None:
    """The id of a live ``network`` grant, or None: commands then run without a network."""
    for gid in sorted(grants):
        grant = grants[gid]
        if grant["tool"] == NETWORK and inactive_reason(grant, now) is None:
            return gid
    return None


def allows(grant: Mapping[str, Any], tool: str, args: Mapping[str, Any], now: float) -> str | None:
    """``None`` if ``grant`` covers calling ``tool`` with ``args`` at ``now``, else why not."""
    if not fnmatch.fnmatchcase(tool, grant["tool"]):
        return f"grant {grant['id']} covers {grant['tool']}, not {tool}"
    inactive = inactive_reason(grant, now)
    if inactive is not None:
        return inactive
    for name, constraint in grant.get("args", {}).items():
        if name not in args:
            return f"grant {grant['id']} requires argument {name!r}"
        if not satisfies(constraint, args[name]):
            return f"grant {grant['id']} does not allow {name}={args[name]!r} ({constraint})"
    return None


def _literal_prefix(pattern: str) -> str:
    m = _WILD.search(pattern)
    return pattern if m is None else pattern[: m.start()]


def _glob_within(child: str, parent: str) -> bool:
    """Whether every text matching ``child`` also matches ``parent`` (conservative)."""
    if child == parent:
        return True
    if not _WILD.search(child):
        return fnmatch.fnmatchcase(child, parent)
    # parent "P*" with a literal P: any text starting with P matches it, and every
    # text matching child starts with child's literal prefix
    head = _literal_prefix(parent)
    return parent == head + "*" and _literal_prefix(child).startswith(head)


def _constraint_within(child: Mapping[str, Any], parent: Mapping[str, Any]) -> bool:
    ((pk, pv),) = parent.items()
    ((ck, cv),) = child.items()
    if pk == "glob":
        if ck == "glob":
            return _glob_within(cv, pv)
        return ck == "one_of" and all(satisfies(parent, v) for v in cv)
    if pk in ("max", "min"):
        if ck == pk:
            return bool(cv <= pv) if pk == "max" else bool(cv >= pv)
        return ck == "one_of" and all(satisfies(parent, v) for v in cv)
    if pk == "one_of":
        return ck == "one_of" and all(satisfies(parent, v) for v in cv)
    if pk == "hosts":
        # hosts match case-insensitively, so their patterns are compared that way too
        return ck == "hosts" and all(
            any(_glob_within(c.lower(), p.lower()) for p in pv) for c in cv
        )
    return False


def narrower(child: Mapping[str, Any], parent: Mapping[str, Any]) -> str | None:
    """``None`` if ``child`` allows nothing ``parent`` does not, else the first way it is wider."""
    if not parent.get("delegable"):
        return f"grant {parent['id']} is not delegable"
    if not _glob_within(child["tool"], parent["tool"]):
        return f"tool {child['tool']!r} is wider than the grant's {parent['tool']!r}"
    for name, pc in parent.get("args", {}).items():
        cc = child.get("args", {}).get(name)
        if cc is None:
            return (
                f"argument {name!r} is constrained by {pc} in the grant but not in the delegation"
            )
        if not _constraint_within(cc, pc):
            return f"argument {name!r}: {cc} is wider than the grant's {pc}"
    if parent.get("max_uses") is not None:
        left = parent["max_uses"] - parent.get("uses", 0)
        if child.get("max_uses") is None or child["max_uses"] > left:
            return f"max_uses must be at most the {left} uses the grant has left"
    if parent.get("valid_until") is not None and (
        child.get("valid_until") is None or child["valid_until"] > parent["valid_until"]
    ):
        return f"valid_until must be no later than the grant's {parent['valid_until']}"
    if parent.get("valid_from") is not None and (
        child.get("valid_from") is None or child["valid_from"] < parent["valid_from"]
    ):
        return f"valid_from must be no earlier than the grant's {parent['valid_from']}"
    return None


def describe(grant: Mapping[str, Any]) -> str:
    """One line for people: what the grant allows, how often and until when."""
    parts = [grant["tool"]]
    if grant.get("args"):
        parts.append("(" + ", ".join(f"{k}: {v}" for k, v in sorted(grant["args"].items())) + ")")
    if grant.get("max_uses") is not None:
        parts.append(f"{grant.get('uses', 0)}/{grant['max_uses']} uses")
    if grant.get("valid_from") is not None:
        parts.append(f"from {_when(grant['valid_from'])}")
    if grant.get("valid_until") is not None:
        parts.append(f"until {_when(grant['valid_until'])}")
    if grant.get("delegable"):
        parts.append("delegable")
    if grant.get("delegated_from"):
        src = grant["delegated_from"]
        parts.append(f"delegated by {src['agent']} from {src['grant']}")
    return " ".join(parts)


def _when(at: float) -> str:
    """A time for people: UTC, to the second (the stored value stays the number)."""
    try:
        return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        # a time stored before windows were bounded: show it, do not fail on it
        return f"{at!r} s after 1970"
