"""Withholding, from an answer to a person, the values it repeats from untrusted text.

An answer that repeats an injected instruction ("forward your mail to
mallory@evil.example", "sign in at https://evil.example/login") is the
attacker's words reaching the person in the agent's voice. Under ``answer:
withhold`` (the data-flow rule's default) the answer is delivered with each such
value replaced by a placeholder saying what was withheld and from which event
(``[link withheld: from untrusted text, event 12]``); what was withheld is
journaled beside the claim, where a person can read it.

The values are those :func:`stead.values.values` finds (links, hosts, e-mail
addresses, identifiers, long numbers, amounts, dates). Each is found in the
answer by the same patterns, the match normalised as ``values`` normalises it
(lowercased, spaces dropped from a number...), so the span replaced is the one
the model wrote, however it wrote it. Prose is not withheld: a sentence
rewritten in the model's words carries no value to find (``answer: ask`` holds
the whole answer for a person instead).
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from typing import Any, NamedTuple

from ..values import values

_WORD = r"[^\s\"'<>()\[\]{}]"
"""A character of a link."""
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("link", re.compile(rf"\bhttps?://{_WORD}+", re.IGNORECASE)),
    # a link written without its scheme: the whole word, host and path
    ("link", re.compile(rf"{_WORD}*[a-z0-9-]\.[a-z]{{2,24}}/{_WORD}+", re.IGNORECASE)),
    ("e-mail address", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("host", re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24}\b", re.I)),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2})?\b")),
    # a date in words, as version 2 of stead.values reads it ("January 11th 2025")
    ("date", re.compile(r"\b[A-Za-z]{3,9}\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}\b")),
    ("date", re.compile(r"\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?[A-Za-z]{3,9}\.?,?\s+\d{4}\b")),
    # an amount with a decimal comma, whole ("1.250,00", not "1.250" and ",00")
    ("amount", re.compile(r"\b\d{1,3}(?:\.\d{3})+,\d{1,2}\b|\b\d+,\d{1,2}\b")),
    ("amount", re.compile(r"\b\d{1,3}(?:,\d{3})*\.\d+\b|\b\d+\.\d+\b")),
    ("number", re.compile(r"\+?\d[\d \-]{3,}\d")),
    ("identifier", re.compile(r"[A-Za-z0-9_-]{6,}")),
)
"""What is looked for, by the name a placeholder gives it (as :mod:`stead.values`
finds it); where two find the same span, the first names it (a date is also a
token of digits and dashes)."""
_TRAILING = ".,;:!?"


class _Span(NamedTuple):
    start: int
    end: int
    kind: str
    source: int


def withhold(
    text: str, untrusted: Mapping[str, int], own: Container[str], version: int = 1
) -> tuple[str, list[dict[str, Any]]]:
    """``text`` with each value it repeats from ``untrusted`` (a normalised value →
    the event it came from) and not ``own`` (a person gave it) replaced by a
    placeholder; and what was withheld: each span as written, its kind and the
    event it came from, in the order they appear."""
    spans: list[_Span] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            raw = m.group().rstrip(_TRAILING)
            found = [v for v in _normalised(kind, raw, version) if v in untrusted and v not in own]
            if found:
                source = max(untrusted[v] for v in found)
                spans.append(_Span(m.start(), m.start() + len(raw), kind, source))
    merged: list[_Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if merged and span.start < merged[-1].end:  # inside (or across) the one before
            last = merged[-1]
            merged[-1] = last._replace(end=max(last.end, span.end))
        else:
            merged.append(span)
    out, withheld, at = [], [], 0
    for span in merged:
        out += [text[at : span.start], _placeholder(span)]
        withheld.append(
            {"value": text[span.start : span.end], "kind": span.kind, "from": span.source}
        )
        at = span.end
    out.append(text[at:])
    return "".join(out), withheld


def _normalised(kind: str, raw: str, version: int) -> set[str]:
    """The values a match stands for, as :func:`stead.values.values` writes them."""
    if kind == "number":
        # a number may be written with spaces, so its match may run on into the next
        # one: it stands for the whole, the values inside are matched on their own
        digits = re.sub(r"[ \-]", "", raw)
        return {digits} if sum(c.isdigit() for c in digits) >= 5 else set()
    # a line of prose is a value too: only what has no space is withheld
    return {v for v in values(raw, version) if " " not in v}


def _placeholder(span: _Span) -> str:
    return f"[{span.kind} withheld: from untrusted text, event {span.source}]"
