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

**Version 2** (agents made since the data-flow rule's second version record
``provenance: 2`` when they are made; older agents keep version 1, so their
journals fold and audit as they always did) also reads a value in the forms a
person writes it: a date in words ("January 11th 2025", "11 Jan 2025", with a
time such as "at 4 pm") as ``2025-01-11`` and ``2025-01-11 16:00``; a date and
time ``2024-05-19 16:00`` or ``2024-05-19T16:00`` as that date and
``2024-05-19 16:00``, never as a long number; an amount with a decimal comma
(``1.250,00``) as ``1250``; and a link with or without its scheme or a
trailing slash as its host and path (``ci.corp.example/runs/8812``). A time
beside an ISO date ("2024-05-19 at 4 pm") is read as ``2024-05-19 16:00`` too.
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


VERSION = 2
"""The version of value extraction new agents record (``provenance`` at creation)."""


def values(value: Any, version: int = 1) -> set[str]:
    """The normalized values in ``value`` (text, or JSON data) worth following, as
    extraction ``version`` reads them."""
    found: set[str] = set()
    of, cached = (_of_text, _cached) if version < 2 else (_of_text_v2, _cached_v2)
    for text in texts(value, numbers=True):
        # a short string is looked at again at each check of a step (a call's
        # arguments, the results they are matched with): its values are cached
        found |= cached(text) if len(text) <= CACHED_CHARS else of(text)
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


_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        ("january jan", "february feb", "march mar", "april apr", "may", "june jun",
         "july jul", "august aug", "september sep sept", "october oct",
         "november nov", "december dec")
    )
    for name in names.split()
}  # fmt: skip
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_MONTH = r"([A-Za-z]{3,9})\.?"
_TIME = r"(?:,?\s*(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?)?"
_WORD_DATES = (
    (re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+(\d{{4}}){_TIME}", re.IGNORECASE), (1, 2, 3)),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}}){_TIME}", re.IGNORECASE), (2, 1, 3)),
)
_ISO_STAMP = re.compile(
    r"\b(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2})?"
    r"|,?\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\b)?\b",
    re.IGNORECASE,
)
_COMMA_AMOUNT = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})*|\d+),(\d{1,2})(?![\d,])")
_LINK = re.compile(
    r"(?:\bhttps?://)?\b((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24})"
    r"(/[^\s\"'<>()\[\]{}]*)",
    re.IGNORECASE,
)


def _of_text_v2(text: str) -> frozenset[str]:
    """The values of one string, version 2 (see the module's docstring)."""
    found: set[str] = set()
    for pattern, (m_at, d_at, y_at) in _WORD_DATES:
        for m in pattern.finditer(text):
            month = _MONTHS.get(m.group(m_at).lower())
            day, year = int(m.group(d_at)), int(m.group(y_at))
            if month is None or not 1 <= day <= 31:
                continue
            date = f"{year:04d}-{month:02d}-{day:02d}"
            found.add(date)
            if m.group(4):
                hour = int(m.group(4)) % 12 + (12 if m.group(6).lower() == "p" else 0)
                found.add(f"{date} {hour:02d}:{int(m.group(5) or 0):02d}")
    for m in _ISO_STAMP.finditer(text):
        found.add(m.group(1))
        if m.group(2):
            found.add(f"{m.group(1)} {m.group(2)}:{m.group(3)}")
        elif m.group(4):  # "2024-05-19 at 4 pm" is the person's 16:00 that day
            hour = int(m.group(4)) % 12 + (12 if m.group(6).lower() == "p" else 0)
            found.add(f"{m.group(1)} {hour:02d}:{int(m.group(5) or 0):02d}")
    for m in _COMMA_AMOUNT.finditer(text):
        whole = m.group(1).replace(".", "")
        amount = f"{whole}.{m.group(2)}".rstrip("0").rstrip(".")
        if sum(c.isdigit() for c in amount) >= 3:
            found.add(amount)
    for m in _LINK.finditer(text):
        # a trailing slash names the same page: dropped, so both forms agree
        path = m.group(2).rstrip(_TRAILING).rstrip("/")
        if len(path) > 1:
            found.add(f"{m.group(1).lower()}{path}")
    # a date, a time or an amount is never read as another number: blanked out first
    rest = _COMMA_AMOUNT.sub(_blank, _ISO_STAMP.sub(_blank, text))
    # a link is its host and path, with or without its scheme
    return frozenset(found | {v for v in _of_text(rest) if not _SCHEME.match(v)})


_SCHEME = re.compile(r"https?://")


def _blank(m: re.Match[str]) -> str:
    return " " * len(m.group())


_cached_v2 = lru_cache(maxsize=4096)(_of_text_v2)
