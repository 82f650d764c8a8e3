"""Checking a spec file and saying every problem at once, each with its line.

The file is read as :func:`~stead.spec.load_spec` reads it (:mod:`stead.yamlsafe`),
checked against the spec's JSON Schema (:mod:`stead.specschema`) with every
error collected, and, when the schema finds nothing, read by
:func:`~stead.spec.parse_spec` too, which checks what a schema cannot: the files a
spec names, a script's decisions, unique goal ids. Each problem is placed at the
line of the field it names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from .errors import SpecError
from .spec import parse_spec
from .specschema import spec_schema
from .yamlsafe import Lines, YamlPath, load_yaml_lines, read_text


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in a spec file, and where."""

    line: int
    column: int
    field: str
    message: str

    def render(self, file: str) -> str:
        """``FILE:LINE:COLUMN: field: what is wrong``."""
        return f"{file}:{self.line}:{self.column}: {self.field}: {self.message}"


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(spec_schema())


def read_spec_file(path: str | Path) -> str:
    """The file's text; a :class:`SpecError` when it cannot be read (a usage error)."""
    return read_text(Path(path), "spec", SpecError)


def check_text(text: str, base_dir: str | Path | None) -> list[Problem]:
    """Every problem of a spec's text, sorted by line; empty when it is fine."""
    try:
        data, lines = load_yaml_lines(text, "the spec", SpecError)
    except SpecError as exc:
        # the last mark YAML names is where the problem is (an earlier one, its context)
        marks = re.findall(r"line (\d+)(?:, column (\d+))?", str(exc))
        line, column = (int(marks[-1][0]), int(marks[-1][1] or 1)) if marks else (1, 1)
        return [Problem(line, column, "(file)", str(exc))]
    problems = schema_problems(data, lines)
    if not problems:
        try:
            parse_spec(data, base_dir)
        except SpecError as exc:
            problems = [_spec_error(exc, lines)]
    return sorted(problems, key=lambda p: (p.line, p.column, p.field))


def schema_problems(data: Any, lines: Lines) -> list[Problem]:
    """What the schema finds wrong with ``data``, each placed by ``lines``."""
    found: list[Problem] = []
    for error in _leaves(_validator().iter_errors(data)):
        found.extend(_explain(error, lines))
    unique = {(p.line, p.column, p.field, p.message): p for p in found}
    return list(unique.values())


def _leaves(errors: Iterable[ValidationError]) -> Iterable[ValidationError]:
    """The errors to show: of a failed ``anyOf``/``oneOf``, those of the form the
    value was meant to take (the one of its type that got furthest), when there is one."""
    for error in errors:
        if error.validator in ("anyOf", "oneOf") and error.context:
            branch = _best_branch(error)
            if branch is not None:
                yield from _leaves(branch)
                continue
        yield error


def _best_branch(error: ValidationError) -> list[ValidationError] | None:
    branches: dict[int, list[ValidationError]] = {}
    for sub in error.context or []:
        branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    depth = len(error.absolute_path)

    def at_root(errs: list[ValidationError], kind: str) -> bool:
        return any(e.validator == kind and len(e.absolute_path) == depth for e in errs)

    # a form of another type, or one whose naming key is missing, was not meant
    meant = [
        errs
        for errs in branches.values()
        if not at_root(errs, "type") and not at_root(errs, "required")
    ]
    if len(meant) != 1:
        return None
    return meant[0]


def _explain(error: ValidationError, lines: Lines) -> list[Problem]:
    path: YamlPath = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    forms = schema.get(error.validator, []) if error.validator in ("anyOf", "oneOf") else []
    if error.validator == "additionalProperties" or any("properties" in f for f in forms):
        allowed = [k for f in [schema, *forms] for k in f.get("properties", {})]
        allowed = list(dict.fromkeys(allowed))
        given = error.instance if isinstance(error.instance, dict) else {}
        unknown = sorted(set(given) - set(allowed))
        out = []
        for key in unknown:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            line, column = _where(lines, (*path, key))
            out.append(
                Problem(
                    line,
                    column,
                    dotted((*path, key)),
                    f"is not a field here; {hint}allowed: {', '.join(allowed)}",
                )
            )
        if out or error.validator == "additionalProperties":
            return out
    line, column = _where(lines, path)
    if error.validator == "required":
        missing = re.match(r"'([^']*)'", error.message)
        name = missing[1] if missing else "?"
        where = dotted(path) if path else "the spec"
        return [Problem(line, column, dotted((*path, name)), f"is required (in {where})")]
    if error.validator in ("anyOf", "oneOf"):
        titles = [f["title"] for f in forms if "title" in f]
        what = f"must be {' or '.join(titles)}" if titles else "is not in any allowed form"
        return [Problem(line, column, dotted(path), f"{what}, got {_short(error.instance)}")]
    if error.validator == "enum":
        choices = ", ".join("null" if v is None else str(v) for v in schema.get("enum", []))
        got = _short(error.instance)
        return [Problem(line, column, dotted(path), f"{got} is not allowed; use one of {choices}")]
    if error.validator == "type":
        kinds = schema.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
        what = " or ".join(_TYPE_WORDS.get(k, k) for k in kinds if k != "null")
        got = _short(error.instance)
        return [Problem(line, column, dotted(path), f"must be {what}, got {got}")]
    return [Problem(line, column, dotted(path), error.message)]


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
}


def _spec_error(exc: SpecError, lines: Lines) -> Problem:
    """A :class:`SpecError` placed at the field it names (its longest known prefix)."""
    text = str(exc).replace("'.", ".")  # a grant's "spec field 'scope[0]'.tool"
    named = re.match(r"spec field '?([A-Za-z0-9_.\[\]-]+?)'?(?::| |$)", text)
    path: YamlPath = ()
    if named:
        for part in re.findall(r"[^.\[\]]+|\[\d+\]", named[1]):
            path = (*path, int(part[1:-1]) if part.startswith("[") else part)
        message = text[named.end() :].lstrip(": ").strip() or text
    else:
        message = text
    line, column = _where(lines, path)
    return Problem(line, column, dotted(path) if path else "(spec)", message)


def _where(lines: Lines, path: YamlPath) -> tuple[int, int]:
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path, (1, 1))


def dotted(path: YamlPath) -> str:
    """A path as the spec's errors name it: ``goals[0].accept[1].command``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(spec)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
