"""Building a :class:`~stead.integrity.monitors.MonitorSet` from a spec's ``monitors:``.

Kept apart from the rules themselves: here the spec's shape (which built-in
rules take which parameters, the custom rule forms) and the errors that name
the field that is wrong.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# re-exported: spec.py and watch.py import it from here
from ..errors import MonitorConfigError as MonitorConfigError
from .dataflow import DataFlow
from .monitors import (
    DEMOTE_LEVELS,
    VERDICTS,
    Budget,
    Count,
    Drift,
    ErrorStreak,
    Loop,
    MonitorSet,
    Probing,
    PythonRule,
    Rule,
    Sequence,
)

BUILT_IN = ("loop", "error_streak", "budget", "dataflow", "probing", "drift")
_PARAMS: dict[str, tuple[str, ...]] = {
    "loop": ("repeat",),
    "error_streak": ("errors",),
    "budget": ("tool_calls", "window", "steps", "wall_seconds", "tokens", "spend"),
    "dataflow": (
        "outbound",
        "changing",
        "untrusted",
        "trusted",
        "verdict",
        "influence",
        "answer",
        "hide",
    ),
    "probing": ("refusals", "window"),
    "drift": (
        "baseline_sessions",
        "min_steps",
        "demote_to",
        "tool_mix",
        "error_rate",
        "refusal_rate",
        "tokens_per_step",
    ),
}


def build_monitors(
    config: Mapping[str, Any] | None,
    *,
    secret_tools: Iterable[str] = (),
    untrusted_tools: Iterable[str] = (),
    trusted_tools: Iterable[str] = (),
    read_tools: Iterable[str] = (),
    acting_tools: Iterable[str] = (),
    changing_tools: Iterable[str] = (),
    naming: Mapping[str, Iterable[str]] | None = None,
    fetching: Mapping[str, Iterable[str]] | None = None,
    load: Callable[[str], Any] | None = None,
    tool_names: Iterable[str] | None = None,
    trusted: Iterable[str] = (),
    trusted_text: Iterable[str] = (),
) -> MonitorSet:
    """The rules a spec's ``monitors:`` section asks for (built-ins on by default).

    The data-flow rule is on by default too, as :data:`DATAFLOW_DEFAULTS` says:
    the results of ``read_tools`` are untrusted (a read brings in what others
    wrote; an action's result is the system's receipt for it), but not those
    of ``trusted_tools`` (tools that declare their results system data); the
    ``acting_tools`` are outbound, ``changing_tools`` change the world in place
    (checked for copies); and a flow or an influenced choice asks a person.
    With ``tool_names`` (when a spec is checked before an agent is made), every
    name or pattern in ``dataflow``'s tool lists must match one of them: one
    that matches nothing would watch nothing, silently.
    """
    if config is not None and not isinstance(config, Mapping):
        raise MonitorConfigError(
            f"monitors must be a mapping of rules to their settings, e.g. "
            f"{{loop: {{repeat: 3}}}}; use {', '.join(BUILT_IN)} or custom"
        )
    config = dict(config or {})
    if not isinstance(config.get("custom") or [], list):
        raise MonitorConfigError("monitors.custom must be a list of rules")
    unknown = sorted(set(config) - set(BUILT_IN) - {"custom"})
    if unknown:
        raise MonitorConfigError(
            f"monitors.{unknown[0]} is not a monitor; use {', '.join(BUILT_IN)} or custom"
        )
    rules: list[Rule] = []
    for name in BUILT_IN:
        params = config.get(name) or {}
        if name == "dataflow" and isinstance(params, Mapping):
            defaults = {
                "untrusted": sorted(read_tools),
                "outbound": sorted(acting_tools),
                "changing": sorted(changing_tools),
            }
            params = {**DATAFLOW_DEFAULTS, **defaults, **params}
        if not isinstance(params, Mapping):
            raise MonitorConfigError(f"monitors.{name} must be a mapping of its settings")
        off = params.get("off", False)
        if not isinstance(off, bool):
            raise MonitorConfigError(f"monitors.{name}.off must be true or false, got {off!r}")
        if off:
            continue
        params = {k: v for k, v in params.items() if k != "off"}
        bad = sorted(set(params) - set(_PARAMS[name]), key=str)
        if bad:
            raise MonitorConfigError(
                f"monitors.{name}.{bad[0]} is not a setting; use {', '.join(_PARAMS[name])}"
            )
        for key, value in params.items():
            _check_setting(f"monitors.{name}.{key}", key, value)
        if name == "budget" and not any(v is not None for k, v in params.items() if k != "window"):
            continue  # no limit set: nothing to count
        if name == "dataflow":
            if tool_names is not None:
                _match_tools(config.get(name) or {}, sorted(tool_names))
            if not any(params.get(k) for k in ("outbound", "changing", "hide")):
                continue  # nothing goes out, changes or is hidden: nothing to watch
            rules.append(
                DataFlow(
                    # what the spec lists ("*": everything) and what tools declare
                    {*(params.get("untrusted") or []), *untrusted_tools, *secret_tools},
                    params.get("outbound") or (),
                    params.get("verdict") or "ask",
                    trusted,  # the values the spec's author gave: their instructions, goals
                    # tools whose results are system data: the spec's and the declared
                    {*(params.get("trusted") or ()), *trusted_tools},
                    trusted_text,
                    None if params.get("influence") == "off" else params.get("influence"),
                    params.get("answer") or "withhold",
                    naming,
                    fetching,
                    params.get("hide") or (),
                    params.get("changing") or (),
                )
            )
            continue
        cls: Any = {"loop": Loop, "error_streak": ErrorStreak, "budget": Budget,
                    "probing": Probing, "drift": Drift}[name]  # fmt: skip
        try:
            rules.append(cls(**params))
        except TypeError as exc:
            raise MonitorConfigError(f"monitors.{name}: {exc}") from None
    for i, item in enumerate(config.get("custom") or []):
        rules.append(_custom(item, f"monitors.custom[{i}]", load))
    return MonitorSet(rules)


DATAFLOW_DEFAULTS: dict[str, Any] = {
    "verdict": "ask",
    "influence": "ask",
    "answer": "withhold",
}
"""The data-flow rule's settings where a spec says nothing of them (and
``untrusted``: every read-only tool, ``outbound``: every effectful one but
``shell``, whose commands reach the network only under a grant a person
gives; ``changing``: every ``idempotent`` tool and every effectful one not
outbound, but the runtime's own workspace tools, whose effects stay in the
agent's workspace, snapshotted and rolled back). A spec's ``dataflow``
section overrides them one by one; ``dataflow: {off: true}`` turns the rule off."""

_COUNTS = ("repeat", "errors", "tool_calls", "steps", "tokens", "refusals", "baseline_sessions",
           "min_steps")  # fmt: skip
_NAMES = ("outbound", "changing", "untrusted", "trusted", "hide")
_CHOICES = {
    "verdict": ("ask", "block"),
    "influence": ("ask", "block", "off"),
    "answer": ("withhold", "mark", "ask"),
}


_RULE_HELP = {
    "loop": "The same call with the same arguments repeat times in a row (default 10): blocked.",
    "error_streak": "errors failed calls in a row (default 10): the agent is suspended.",
    "budget": "Limits on tool calls per window, steps, wall-clock seconds, tokens or spend.",
    "dataflow": "Text from an untrusted or secret-bearing tool's result in an outbound "
    "tool's arguments: a person is asked (on by default).",
    "probing": "refusals refused calls within window seconds (default 10 in 600): suspended.",
    "drift": "The agent's behaviour moving away from its first sessions' baseline: warned, "
    "and with demote_to its autonomy is lowered.",
}


_SETTING_HELP = {
    "repeat": "Identical calls in a row that count as a loop.",
    "errors": "Failed calls in a row that count as a streak.",
    "tool_calls": "The most tool calls per window.",
    "window": "The window, in seconds.",
    "steps": "The most steps.",
    "wall_seconds": "The most seconds from the agent's start.",
    "tokens": "The most tokens the model reports using.",
    "spend": "The most spend the model reports.",
    "outbound": "Tools (names or patterns) whose arguments carry data out.",
    "changing": "Tools (names or patterns) that change the world in place: an argument "
    "copied from untrusted text asks.",
    "untrusted": "Tools (or TOOL.FIELD) whose results are untrusted text.",
    "trusted": "Tools whose results are system data, never untrusted.",
    "hide": "Tools whose untrusted results the model is shown as handles, never as text.",
    "verdict": "What a flow gets: ask a person, or block it.",
    "influence": "An outbound call chosen while untrusted text was in view: ask, block or off.",
    "answer": "An answer to a person that repeats untrusted text: withhold the values "
    "it repeats (the default), mark it, or ask a person first.",
    "refusals": "Refused calls within the window that count as probing.",
    "baseline_sessions": "Sessions that make the baseline.",
    "min_steps": "Steps a session needs before it is compared.",
    "demote_to": "The autonomy level the agent is lowered to on drift.",
    "tool_mix": "How far the mix of tools may move from the baseline.",
    "error_rate": "How far the error rate may move from the baseline.",
    "refusal_rate": "How far the refusal rate may move from the baseline.",
    "tokens_per_step": "How far the tokens per step may move from the baseline.",
}
_CUSTOM_HELP: dict[str, tuple[str, dict[str, Any]]] = {
    "verdict": ("What a match gets.", {"enum": list(VERDICTS), "default": "warn"}),
    "sequence": ("Two tool names (or patterns): the second called within `within` seconds "
                 "of the first.", {"type": "array", "minItems": 2, "maxItems": 2}),
    "within": ("Seconds, for a sequence.", {"type": "number"}),
    "count": ("A tool name or pattern whose calls are counted.", {}),
    "max": ("The most calls of count within the window.", {"type": "integer"}),
    "window": ("Seconds, for a count.", {"type": "number"}),
    "python": ("A function f(event, call), module:function.",
               {"type": "string", "pattern": ".:."}),
}  # fmt: skip


def _setting_schema(key: str) -> dict[str, Any]:
    """What :func:`_check_setting` lets a built-in rule's setting be (null: unset)."""
    out: dict[str, Any] = {"description": _SETTING_HELP[key]}
    if key == "demote_to":
        return out | {"enum": [*DEMOTE_LEVELS, None]}
    if key in _CHOICES:
        return out | {"enum": [*_CHOICES[key], None]}
    if key in _NAMES:
        return out | {"type": ["array", "null"], "items": {"type": "string", "minLength": 1}}
    kind = "integer" if key in _COUNTS else "number"
    return out | {"type": [kind, "null"], "exclusiveMinimum": 0}


def monitors_schema() -> dict[str, Any]:
    """JSON Schema of a spec's ``monitors:``, as :func:`build_monitors` reads it."""
    rules: dict[str, Any] = {}
    for name in BUILT_IN:
        settings = {key: _setting_schema(key) for key in _PARAMS[name]}
        settings["off"] = {"type": "boolean", "default": False, "description": "Turn it off."}
        rules[name] = {
            "description": _RULE_HELP[name],
            "type": ["object", "null"],
            "properties": settings,
            "additionalProperties": False,
        }
    rules["custom"] = {
        "description": "Rules of your own: {sequence: [A, B], within: SECONDS}, "
        "{count: PATTERN, max: N, window: SECONDS} or {python: module:function}, each "
        "with a verdict.",
        "type": ["array", "null"],
        "items": {
            "type": "object",
            "properties": {
                key: {"description": help_text, **value}
                for key, (help_text, value) in _CUSTOM_HELP.items()
            },
            "anyOf": [
                {"required": ["sequence", "within"]},
                {"required": ["count", "max", "window"]},
                {"required": ["python"]},
            ],
        },
    }
    return {
        "type": ["object", "null"],
        "properties": rules,
        "additionalProperties": False,
    }


def _match_tools(params: Mapping[str, Any], names: list[str]) -> None:
    for key in _NAMES:
        for entry in params.get(key) or []:
            pattern = entry.partition(".")[0]  # untrusted: TOOL.FIELD names a field
            if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
                raise MonitorConfigError(
                    f"monitors.dataflow.{key}: {entry!r} matches none of the agent's tools "
                    f"({', '.join(names) or 'none'}); name a tool or a pattern (fnmatch) of them"
                )


def _check_setting(where: str, key: str, value: Any) -> None:
    """A built-in rule's setting has the type it needs (None leaves it unset)."""
    if value is None or key == "demote_to":
        return
    if key in _CHOICES:
        if value not in _CHOICES[key]:
            raise MonitorConfigError(f"{where} must be {' or '.join(_CHOICES[key])}, got {value!r}")
        return
    if key in _NAMES:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise MonitorConfigError(f"{where} must be a list of tool names or patterns")
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise MonitorConfigError(f"{where} must be a number above 0, got {value!r}")
    if key in _COUNTS and not isinstance(value, int):
        raise MonitorConfigError(f"{where} must be a whole number of at least 1, got {value!r}")
    if value == float("inf"):
        raise MonitorConfigError(f"{where} must be a finite number")


def _custom(item: Any, where: str, load: Callable[[str], Any] | None) -> Rule:
    if not isinstance(item, Mapping):
        raise MonitorConfigError(f"{where} must be a mapping (sequence, count or python)")
    verdict = item.get("verdict", "warn")
    if verdict not in VERDICTS:
        raise MonitorConfigError(f"{where}.verdict must be one of {', '.join(VERDICTS)}")
    number = (int, float)
    if "sequence" in item:
        seq, within = item["sequence"], item.get("within")
        if not (isinstance(seq, list) and len(seq) == 2 and isinstance(within, number)):
            raise MonitorConfigError(f"{where}: write {{sequence: [A, B], within: SECONDS}}")
        return Sequence(str(seq[0]), str(seq[1]), float(within), verdict)
    if "count" in item:
        most, window = item.get("max"), item.get("window")
        if not (isinstance(most, int) and isinstance(window, number)):
            raise MonitorConfigError(f"{where}: write {{count: PATTERN, max: N, window: SECONDS}}")
        return Count(str(item["count"]), most, float(window), verdict)
    if "python" in item:
        ref = item["python"]
        module, _, name = ref.partition(":") if isinstance(ref, str) else ("", "", "")
        if not (module and name):
            raise MonitorConfigError(
                f"{where}.python must be 'module:function' (a function f(event, call)), not {ref!r}"
            )
    if "python" in item and load is not None:
        func = load(str(item["python"]))
        if not callable(func):
            raise MonitorConfigError(f"{where}.python: {item['python']} is not a function")
        return PythonRule(str(item["python"]), func)
    raise MonitorConfigError(f"{where}: a custom rule is a sequence, a count or python")
