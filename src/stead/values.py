"""The values that matter in a piece of data, as provenance follows them.

Whole lines rarely flow: a model rewrites text around the one value it takes
(a link put in a new sentence, an address in a list, an account number with
its spaces removed). :func:`values` picks out what is worth following, each
normalized so that simple rewrites do not hide it:

* URLs (scheme and host lowercased, trailing punctuation dropped), their
  host names, and their path and query (also found in a link written without
  its scheme, glued to other text: ``…post-evil.example/login?next=x``);
  bare host names with at least two dots (``notes.txt`` is a file's name as
  often as a host's);
* e-mail addresses (lowercased);
* identifiers: tokens of 6 or more letters, digits, ``_`` or ``-`` that hold
  both letters and digits (account numbers, file ids, tokens), lowercased;
* long numbers (5 or more digits, spaces and dashes dropped: phone and account
  numbers) and amounts with a fractional part (``98.70`` → ``98.7``);
* dates written ``YYYY-MM-DD``;
* and, for longer text, each line of 40 or more characters, lowercased with
  its whitespace collapsed.

Short common words and small numbers are never values: they would connect
everything to everything.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

_URL = re.compile(r"\bhttps?://[^\s\"'<>()\[\]{}]+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_HOST = re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24}\b", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z0-9_-]{6,}")
_LONG_NUMBER = re.compile(r"\+?\d[\d \-]{3,}\d")
_AMOUNT = re.compile(r"\b\d{1,3}(?:,\d{3})*\.\d+\b|\b\d+\.\d+\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_BARE_PATH = re.compile(r"[a-z0-9-]\.[a-z]{2,24}(/[^\s,;\"'<>()\[\]{}]+)", re.IGNORECASE)
"""A link without its scheme (``evil.example/login?next=x``): its path is a value."""
PATH_CHARS = 8
LINE_CHARS = 40
_TRAILING = ".,;:!?"


def texts(value: Any, numbers: bool = False) -> Iterator[str]:
    """Every string in JSON data (and, with ``numbers``, each number's text)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from texts(v, numbers)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from texts(v, numbers)
    elif numbers and isinstance(value, int | float) and not isinstance(value, bool):
        yield repr(value)


def _url(raw: str) -> tuple[str, str]:
    url = raw.rstrip(_TRAILING)
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}://{host.lower()}{slash}{path}", host.lower().split(":")[0]


def values(value: Any) -> set[str]:
    """The normalized values in ``value`` (text, or JSON data) worth following."""
    found: set[str] = set()
    for text in texts(value, numbers=True):
        # a short string is looked at again at each check of a step (a call's
        # arguments, the results they are matched with): its values are cached
        found |= _cached(text) if len(text) <= CACHED_CHARS else _of_text(text)
    return found


CACHED_CHARS = 4096
"""Strings up to this long have their values cached (4096 of them at most)."""


def _of_text(text: str) -> frozenset[str]:
    """The values of one string."""
    found: set[str] = set()
    for m in _URL.finditer(text):
        url, host = _url(m.group())
        found |= {url, host}
        path = url.partition("://")[2].partition("/")[2]
        if len(path) + 1 >= PATH_CHARS:  # its path and query, wherever it is put
            found.add("/" + path)
    for m in _BARE_PATH.finditer(text):
        path = m.group(1).rstrip(_TRAILING)
        if len(path) >= PATH_CHARS:
            found.add(path)
    found |= {m.group().lower() for m in _EMAIL.finditer(text)}
    # a bare host name needs two dots: one is as often a file's name (notes.txt)
    found |= {h for m in _HOST.finditer(text) if (h := m.group().lower()).count(".") >= 2}
    for m in _TOKEN.finditer(text):
        token = m.group()
        if any(c.isdigit() for c in token) and any(c.isalpha() for c in token):
            found.add(token.lower())
    for m in _LONG_NUMBER.finditer(text):
        digits = re.sub(r"[ \-]", "", m.group())
        if sum(c.isdigit() for c in digits) >= 5:
            found.add(digits)
    for m in _AMOUNT.finditer(text):
        amount = m.group().replace(",", "").rstrip("0").rstrip(".")
        if sum(c.isdigit() for c in amount) >= 3:  # 98.70, not 2.0
            found.add(amount)
    found |= {m.group() for m in _DATE.finditer(text)}
    for line in text.splitlines():
        squeezed = " ".join(line.split()).lower()
        if len(squeezed) >= LINE_CHARS:
            found.add(squeezed)
    return frozenset(found)


_cached = lru_cache(maxsize=4096)(_of_text)
