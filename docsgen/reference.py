"""Reference pages made from the code that they describe.

Each function turns one source of truth into a Markdown page: the command line from
its argparse parser, the HTTP API from the OpenAPI document the server serves, agent
specs from their JSON Schema, and the Python API from the package's ``__all__``
(whose docstrings mkdocstrings renders). A page can then never say what the code does
not do; a change to the code changes the page at the next build.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

GENERATED = "<!-- made from the code by docsgen/reference.py when the site is built -->\n"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# -- the command line -------------------------------------------------------------------

_PLAIN = {"text": "the message's text", "spec": "the agent spec's path (YAML)"}
"""What a positional argument the parser gives no help for means."""


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, Any]]:
    """(name, one-line help, parser) of each subcommand, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _arguments(parser: argparse.ArgumentParser, shared: set[str]) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS or action.dest in shared:
            continue
        if action.option_strings:
            name = ", ".join(f"`{o}`" for o in action.option_strings)
            if action.nargs != 0:
                name += f" `{action.metavar or action.dest.upper()}`"
        else:
            name = f"`{action.metavar or action.dest}`"
        text = action.help or _PLAIN.get(action.dest, "")
        if not text and action.dest.endswith("_id"):
            text = f"the {action.dest.removesuffix('_id').replace('_', ' ')}'s id"
        if action.choices and not isinstance(action.choices, dict):
            text += f" (one of {', '.join(f'`{c}`' for c in action.choices)})"
        if (
            action.option_strings
            and action.default not in (None, False, argparse.SUPPRESS, [])
            and action.nargs != 0
            and "default" not in text
        ):
            text += f" (default `{action.default}`)"
        rows.append(f"| {name} | {_cell(text % vars(action) if '%(' in text else text)} |")
    if not rows:
        return []
    return ["| argument | meaning |", "|---|---|", *rows, ""]


def cli_page(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> str:
    """Every command, its usage and its arguments; the options every command takes once."""
    shared = {a.dest for a in common._actions}
    lines = [
        "# Command line reference",
        "",
        GENERATED,
        f"{parser.description}",
        "",
        "## Options of every command",
        "",
        *_arguments(common, set()),
        f"{parser.epilog}",
        "",
    ]

    def walk(prefix: str, p: argparse.ArgumentParser, depth: int) -> None:
        for name, help_text, sub in _subcommands(p):
            full = f"{prefix} {name}"
            lines.extend([f"{'#' * depth} `{full}`", "", _cell(help_text) + ".", ""])
            if sub.description and sub.description != help_text:
                lines.extend([sub.description.strip(), ""])
            usage = " ".join(sub.format_usage().split())
            lines.extend(["```text", usage.removeprefix("usage: "), "```", ""])
            lines.extend(_arguments(sub, shared))
            walk(full, sub, min(depth + 1, 4))

    walk("stead", parser, 2)
    return "\n".join(lines).rstrip() + "\n"


# -- the HTTP API -----------------------------------------------------------------------


def _schema_text(schema: Any, components: dict[str, Any]) -> str:
    if not isinstance(schema, dict):
        return ""
    if "$ref" in schema:
        return f"`{schema['$ref'].rpartition('/')[2]}`"
    return f"`{json.dumps(schema, sort_keys=True)}`" if len(json.dumps(schema)) < 120 else "object"


def http_page(document: dict[str, Any]) -> str:
    """Every route of the OpenAPI document: method, path, summary, who may call it,
    its parameters, body and answers."""
    components = document.get("components", {})
    info = document.get("info", {})
    lines = [
        "# HTTP API reference",
        "",
        GENERATED,
        f"{info.get('title', '')} {info.get('version', '')}. {info.get('description', '')}".strip(),
        "",
        "The same document is served by `stead serve` at `/v1/openapi.json`.",
        "",
    ]
    for path, item in document["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            lines.extend([f"## `{method.upper()} {path}`", "", _cell(op.get("summary", "")), ""])
            if op.get("description"):
                lines.extend([op["description"].strip(), ""])
            if op.get("security") == []:
                lines.extend(["No token is needed.", ""])
            params = op.get("parameters", [])
            if params:
                lines.extend(["| parameter | in | meaning |", "|---|---|---|"])
                for p in params:
                    text = p.get("description", "") + (" (required)" if p.get("required") else "")
                    lines.append(f"| `{p['name']}` | {p['in']} | {_cell(text)} |")
                lines.append("")
            body = op.get("requestBody", {}).get("content", {})
            for kind, media in body.items():
                shape = _schema_text(media.get("schema"), components)
                lines.extend([f"Body ({kind}): {shape}", ""])
            answers = op.get("responses", {})
            if answers:
                lines.extend(["| status | meaning |", "|---|---|"])
                for status, answer in answers.items():
                    lines.append(f"| {status} | {_cell(answer.get('description', ''))} |")
                lines.append("")
    schemas = components.get("schemas", {})
    if schemas:
        lines.extend(["## Schemas", ""])
        for name, schema in schemas.items():
            lines.extend([f"### `{name}`", "", "```json", json.dumps(schema, indent=2), "```", ""])
    return "\n".join(lines).rstrip() + "\n"


# -- agent specs ------------------------------------------------------------------------


def _type_of(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        text = " or ".join(kinds)
        if "array" in kinds and isinstance(schema.get("items"), dict):
            inner = _type_of(schema["items"])
            text = text.replace("array", f"list of {inner}" if inner else "list")
        return text
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(t for t in (_type_of(s) for s in schema[key]) if t)
    if "$ref" in schema:
        name = schema["$ref"].rpartition("/")[2]
        return f"[{name}](#{name.lower()})"
    return ""


def _fields(schema: dict[str, Any], prefix: str, out: list[str]) -> None:
    required = set(schema.get("required", []))
    for name, field in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        bits = [_cell(field.get("description", ""))]
        if "default" in field and "default" not in bits[0].lower():
            bits.append(f"Default: `{json.dumps(field['default'])}`.")
        low, high = field.get("minimum"), field.get("maximum")
        if low is not None and high is not None:
            bits.append(f"From {low} to {high}.")
        elif low is not None:
            bits.append(f"At least {low}.")
        elif high is not None:
            bits.append(f"At most {high}.")
        need = "required" if name in required else "optional"
        out.append(f"| `{path}` | {_type_of(field)} | {need} | {' '.join(b for b in bits if b)} |")
        if "properties" in field:
            _fields(field, f"{path}.", out)
        items = field.get("items")
        if isinstance(items, dict) and items.get("type") == "object" and "properties" in items:
            _fields(items, f"{path}[].", out)


def spec_page(schema: dict[str, Any]) -> str:
    """Every field of an agent spec, from the spec's JSON Schema."""
    lines = [
        "# Agent spec reference",
        "",
        GENERATED,
        _cell(schema.get("description", "")),
        "",
        'The JSON Schema itself is <a href="../agent-spec.schema.json">agent-spec.schema.json</a>'
        " (`stead spec schema` prints the same); [Checking specs](../specs.md) says how an"
        " editor uses it and what `stead spec check` adds.",
        "",
        "| field | type | | meaning |",
        "|---|---|---|---|",
    ]
    _fields(schema, "", lines)
    lines.append("")
    for name, sub in schema.get("$defs", {}).items():
        lines.extend([f"## {name}", "", _cell(sub.get("description", "")), ""])
        if "properties" in sub:
            lines.extend(["| field | type | | meaning |", "|---|---|---|---|"])
            _fields(sub, "", lines)
            lines.append("")
        elif "oneOf" in sub or "anyOf" in sub:
            for option in sub.get("oneOf", sub.get("anyOf", [])):
                said = option.get("title") or _type_of(option)
                if option.get("description"):
                    said += f": {_cell(option['description'])}"
                elif "pattern" in option:
                    said += f" (matching `{option['pattern']}`)"
                lines.append(f"- {said}")
                if "properties" in option:
                    lines.extend(["", "    | field | type | | meaning |", "    |---|---|---|---|"])
                    inner: list[str] = []
                    _fields(option, "", inner)
                    lines.extend(f"    {row}" for row in inner)
                    lines.append("")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- the Python API ---------------------------------------------------------------------


def python_page(names: list[str]) -> str:
    """The public API: every name in ``stead.__all__``, rendered by autodoc from its
    docstring."""
    import inspect

    import stead

    lines = [
        "# Python API reference",
        "",
        GENERATED,
        "What `import stead` gives: the names in `stead.__all__`, and nothing else, are the",
        "public API; everything else may change between versions.",
        "",
    ]
    for name in sorted(n for n in names if not n.startswith("_")):
        value = getattr(stead, name)
        if inspect.isclass(value):
            kind, options = "autoclass", [":members:", ":show-inheritance:"]
        elif callable(value):
            kind, options = "autofunction", []
        else:
            kind, options = "autodata", [":no-value:"]
        # autodoc writes reStructuredText, which a Markdown page must be told to read
        rst = [f".. {kind.removeprefix('{')}:: stead.{name}", *(f"   {o}" for o in options)]
        lines.extend(["```{eval-rst}", *rst, "```", ""])
    return "\n".join(lines).rstrip() + "\n"
