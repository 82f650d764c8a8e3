"""Acceptance checks: what must be true, at that moment, for a goal to count as done.

A goal in a spec may carry a list of checks under ``accept``::

    goals:
      - id: rename
        accept:
          - {command: "pytest -q", timeout: 120}      # exit 0 in the sandbox passes
          - {files_exist: [shop/cart.py]}
          - {file_contains: {path: shop/cart.py, text: compute_total}}
          - {file_matches: {path: README.md, pattern: "^# Shop"}}
          - {predicate: "mychecks:no_todo_left"}        # f(state, workspace) -> bool
          - {sign_off: true}                            # a person: stead signoff ID GOAL

Every check is run when the model claims the goal complete and again when it
claims to have finished, so success is never declared from remembered work:
the evidence (which check, pass or fail, a digest of what it saw, when) is
journaled with the claim. A goal without checks is completed on the model's
claim, and its evidence says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import SpecError

CHECK_KINDS = ("command", "files_exist", "file_contains", "file_matches", "predicate", "sign_off")


DEFAULT_TIMEOUT = 120
_CHECK_FORMS: dict[str, tuple[str, dict[str, Any]]] = {
    "command": ("A command line run in the sandbox; exit 0 passes.",
                {"type": "string", "pattern": r"\S"}),
    "files_exist": ("Workspace paths that must all exist.",
                    {"type": "array", "minItems": 1, "items": {"type": "string"}}),
    "file_contains": ("A workspace file that must contain a text.",
                      {"type": "object", "required": ["path", "text"],
                       "properties": {"path": {"type": "string", "description": "The file."},
                                      "text": {"type": "string",
                                               "description": "The text."}}}),
    "file_matches": ("A workspace file that must match a regular expression.",
                     {"type": "object", "required": ["path", "pattern"],
                      "properties": {"path": {"type": "string", "description": "The file."},
                                     "pattern": {"type": "string",
                                                 "description": "A Python regex."}}}),
    "predicate": ("A Python function, module:function, called as f(state, workspace).",
                  {"type": "string", "pattern": ":"}),
    "sign_off": ("A person's sign-off: stead signoff AGENT GOAL.", {"const": True}),
}  # fmt: skip


def check_schema() -> dict[str, Any]:
    """JSON Schema of one acceptance check, as :func:`parse_check` reads it."""
    forms = []
    for kind in CHECK_KINDS:
        help_text, value = _CHECK_FORMS[kind]
        properties = {kind: {"description": help_text, **value}}
        if kind == "command":
            properties["timeout"] = {
                "description": "Seconds the command may take.",
                "type": "number",
                "exclusiveMinimum": 0,
                "default": DEFAULT_TIMEOUT,
            }
        forms.append(
            {
                "title": f"a {kind} check",
                "type": "object",
                "properties": properties,
                "required": [kind],
                "additionalProperties": False,
            }
        )
    return {
        "description": "A check that must pass for the goal to count as done: one of "
        + ", ".join(CHECK_KINDS)
        + ".",
        "anyOf": forms,
    }


def _fail(where: str, problem: str) -> SpecError:
    return SpecError(f"spec field '{where}': {problem}")


def parse_check(value: Any, where: str) -> dict[str, Any]:
    """One acceptance check, validated; the error names the field and what is allowed."""
    if not isinstance(value, Mapping):
        raise _fail(where, f"a check is a mapping with one of {', '.join(CHECK_KINDS)}")
    kinds = [k for k in value if k in CHECK_KINDS]
    extra = sorted(set(value) - set(CHECK_KINDS) - {"timeout"})
    if len(kinds) != 1 or extra:
        raise _fail(
            where,
            f"a check names exactly one of {', '.join(CHECK_KINDS)} "
            f"(and, for command, a timeout); got {', '.join(sorted(map(str, value)))}",
        )
    (kind,) = kinds
    arg = value[kind]
    if kind == "command":
        timeout = value.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(arg, str) or not arg.strip():
            raise _fail(f"{where}.command", "must be a command line, e.g. 'pytest -q'")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise _fail(f"{where}.timeout", "must be a number of seconds above 0")
        return {"command": arg, "timeout": float(timeout)}
    if "timeout" in value:
        raise _fail(f"{where}.timeout", "only a command check takes a timeout")
    if kind == "files_exist":
        if not isinstance(arg, list) or not arg or not all(isinstance(p, str) for p in arg):
            raise _fail(f"{where}.files_exist", "must be a non-empty list of workspace paths")
        return {"files_exist": list(arg)}
    if kind in ("file_contains", "file_matches"):
        key = "text" if kind == "file_contains" else "pattern"
        if (
            not isinstance(arg, Mapping)
            or not isinstance(arg.get("path"), str)
            or not isinstance(arg.get(key), str)
        ):
            raise _fail(f"{where}.{kind}", f"must be {{path: PATH, {key}: TEXT}}")
        if kind == "file_matches":
            try:
                re.compile(arg["pattern"])
            except re.error as exc:
                raise _fail(f"{where}.file_matches.pattern", f"is not a regex: {exc}") from None
        return {kind: {"path": arg["path"], key: arg[key]}}
    if kind == "predicate":
        if not isinstance(arg, str) or ":" not in arg:
            raise _fail(f"{where}.predicate", "must be 'module:function'")
        return {"predicate": arg}
    if arg is not True:
        raise _fail(f"{where}.sign_off", "must be true")
    return {"sign_off": True}


def describe(check: Mapping[str, Any]) -> str:
    """A short name for a check, used in evidence and in what the model is shown."""
    kind = next(k for k in check if k in CHECK_KINDS)
    arg = check[kind]
    if kind == "command":
        return f"command {arg!r}"
    if kind == "files_exist":
        return "files exist: " + ", ".join(arg)
    if kind == "file_contains":
        return f"{arg['path']} contains {arg['text']!r}"
    if kind == "file_matches":
        return f"{arg['path']} matches /{arg['pattern']}/"
    if kind == "predicate":
        return f"predicate {arg}"
    return "a person's sign-off"
