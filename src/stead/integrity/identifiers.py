"""Arguments that name something: tracked by what they are, whatever their length.

A value in :mod:`stead.values` must be long or distinctive to be followed (short
numbers and words would connect everything to everything). An argument that
*names* something is different: ``file_id: 13``, ``member: mallory``, ``role:
admin`` act on exactly what they name, so a token an untrusted result put there
matters however short it is. Which arguments name something comes from the tool's
schema (an ``enum``; a ``format`` such as ``uuid`` or ``uri``) and the argument's
name (its last word is an id, a key, a path, a handle, an account...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..tools.base import Tool

NAMING_WORDS = frozenset(
    {"id", "ids", "key", "keys", "path", "paths", "file", "files", "handle", "handles",
     "user", "users", "username", "member", "members", "account", "accounts", "number",
     "ref", "slug", "uuid", "role", "channel", "booking", "issue", "ticket", "order",
     "invoice", "message", "repo", "repository", "branch",
     "amount", "amounts", "price", "total", "fee", "sum"}
)  # fmt: skip
"""The last word of an argument's name that makes it name something (an amount of
money too: "pay 900" in a statement must not become the payment's amount unasked)."""

NAMING_FORMATS = frozenset({"uuid", "uri", "iri", "email", "hostname", "idn-email"})

ADDRESS_WORDS = frozenset({"url", "urls", "uri", "uris", "link", "links", "href", "endpoint"})
"""The last word of an argument's name that makes it an address a tool reaches."""
ADDRESS_FORMATS = frozenset({"uri", "iri", "uri-reference", "iri-reference"})

_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.@:/+-]*", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+|[0-9]+")


def _properties(schema: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], list[str]]]:
    """Each argument of a tool's JSON Schema: its name, its schema, its name's words."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return
    for name, prop in props.items():
        words = _WORD.findall(re.sub(r"(?<=[a-z])(?=[A-Z])", "_", str(name)).lower())
        yield str(name), prop if isinstance(prop, Mapping) else {}, words


def naming_args(schema: Mapping[str, Any]) -> frozenset[str]:
    """The arguments of a tool's JSON Schema that name something."""
    out = set()
    for name, prop, words in _properties(schema):
        items = prop.get("items")
        items = items if isinstance(items, Mapping) else {}
        if (
            "enum" in prop
            or "enum" in items
            or prop.get("format") in NAMING_FORMATS
            or (words and words[-1] in NAMING_WORDS)
        ):
            out.add(name)
    return frozenset(out)


def address_args(schema: Mapping[str, Any]) -> frozenset[str]:
    """The arguments of a tool's JSON Schema that are an address it reaches (a URL):
    a read that fetches one sends it, and whatever it carries, to that address's host."""
    return frozenset(
        name
        for name, prop, words in _properties(schema)
        if prop.get("format") in ADDRESS_FORMATS or (words and words[-1] in ADDRESS_WORDS)
    )


_DECIMAL = re.compile(r"[0-9]+\.[0-9]+")


def _plain(token: str) -> str:
    """A token, a decimal number written without its trailing zeros (``310.50`` is
    ``310.5``, ``900.00`` is ``900``), so a number matches however it is written."""
    if _DECIMAL.fullmatch(token):
        return token.rstrip("0").rstrip(".")
    return token


def tokens(text: str) -> set[str]:
    """The whole tokens of ``text``, lowercased, with trailing punctuation dropped."""
    return {_plain(t.rstrip(".:/-").lower()) for t in _TOKEN.findall(text)} - {""}


def named(value: Any) -> Iterator[str]:
    """The tokens an argument's value names: itself, whole, for text and numbers;
    each item's for a list."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, float):
        value = int(value) if value.is_integer() else repr(value)
    if isinstance(value, int | str):
        token = _plain(str(value).strip().rstrip(".").lower())
        if token:
            yield token
    elif isinstance(value, list | tuple):
        for item in value:
            yield from named(item)


def of_tools(
    tools: Iterable[tuple[str, Tool]], pick: Callable[[Mapping[str, Any]], frozenset[str]]
) -> dict[str, frozenset[str]]:
    """The arguments ``pick`` finds in each tool's schema (:func:`naming_args`,
    :func:`address_args`), by tool name; tools with none are left out."""
    return {name: found for name, tool in tools if (found := pick(tool.schema))}
