"""Values a person pointed at in the system's own data.

"Send Bob Carol's address", "move 200 to my savings account", "put my flight in
my calendar": the person names a record of a trusted result (the directory's
line for Carol, the bank's savings account, the booking of the flight) and the
agent takes a value from it. Such a value is the person's choice, whatever
untrusted text was in view when the agent took it, so it is not counted as
influence (:class:`~stead.integrity.dataflow.DataFlow`).

A record is a line of a trusted tool's result (one that declares its results
system data, or that the spec names trusted), or the scalar fields of one
object of it. A person points at it when it holds one of their words (four
letters or more, not a common word) that stands in at most two records of that
result (a word every row holds points at none):
the hotel list's record for the Ritz holds no word of "book a hotel for two
nights", so a choice of it after reading a review still asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..values import values
from .identifiers import tokens

Record = tuple[frozenset[str], frozenset[str]]
"""A record's values and its words."""

MAX_RECORDS = 500
"""How many records of one result are kept (a long listing points at nothing more)."""

_COMMON = frozenset(
    [
        "this",
        "that",
        "with",
        "from",
        "into",
        "onto",
        "for",
        "and",
        "the",
        "your",
        "mine",
        "please",
        "them",
        "they",
        "their",
        "there",
        "then",
        "than",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "would",
        "could",
        "should",
        "have",
        "has",
        "had",
        "been",
        "being",
        "about",
        "after",
        "before",
        "also",
        "just",
        "only",
        "some",
        "more",
        "most",
        "other",
        "each",
        "every",
        "send",
        "tell",
        "make",
        "take",
        "give",
        "show",
        "find",
        "want",
        "need",
        "like",
    ]
)


def words_of(texts: Iterable[str]) -> frozenset[str]:
    """The words of what people wrote that can point at a record."""
    found: set[str] = set()
    for text in texts:
        found |= {t for t in tokens(text) if len(t) >= 4 and t not in _COMMON}
    return frozenset(found)


def records(output: Any, drop: set[str], version: int = 1) -> list[Record]:
    """The records of a trusted result, each with its values and words; ``drop``
    names the fields that are someone else's text."""
    found = [
        (frozenset(values(text, version)), frozenset(tokens(text)))
        for text in _record_texts(output, drop)
    ]
    return [r for r in found if r[0]][:MAX_RECORDS]


def _record_texts(value: Any, drop: set[str]) -> Iterator[str]:
    if isinstance(value, str):
        yield from (line for line in value.splitlines() if line.strip())
    elif isinstance(value, Mapping):
        # its values only: a key ("name", "price") is no word of the record's
        own = [str(v) for k, v in value.items() if k not in drop and _scalar(v) and v is not None]
        if own:
            yield " ".join(own)
        for k, v in value.items():
            if k not in drop and not _scalar(v):
                yield from _record_texts(v, drop)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _record_texts(v, drop)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


MAX_POINTED = 2
"""A word that stands in more records of one result than this points at none of them
("read", "paid": a status every row has)."""


def pointed(held: Iterable[Record], words: frozenset[str]) -> set[str]:
    """The values of the records of one result that hold one of ``words``, counting
    only the words that stand in at most :data:`MAX_POINTED` of its records."""
    held = list(held)
    hits: dict[str, int] = {}
    for _, record_words in held:
        for w in record_words & words:
            hits[w] = hits.get(w, 0) + 1
    naming = frozenset(w for w, n in hits.items() if n <= MAX_POINTED)
    out: set[str] = set()
    for found, record_words in held:
        if record_words & naming:
            out |= found
    return out
