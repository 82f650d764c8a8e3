"""Redaction: the shapes of a secret the journal must not keep, and the object that hides them.

A :class:`Redactor` is made once per activation from the values of every secret
the agent's tools may be given. It derives, once, the shapes in which a value
commonly travels: the value itself, reversed, JSON-escaped, URL-encoded (``%XX``
and ``+`` for spaces), hex, and base64 in the standard and URL-safe alphabets,
padded or not, at each of the three byte alignments it can have inside a longer
encoded stream. Matching ignores case, so an upper-cased value, upper-case hex
and the like are found too.

Any run of characters of one of those shapes at least :func:`fragment_length`
long is replaced by ``[secret:NAME]``: so a prefix, a truncated value, or the
longer part of a value split in two is hidden, while a run that short is not
ordinary text. All the strings of one value (stdout and stderr of one result,
say) are matched as one text, in their order and in reverse, so a value split
across two of them is hidden in both.

A secret shorter than :data:`SHORT` characters is matched only whole and exactly
(as itself and JSON-escaped): its pieces and encodings would be too common to
hide without hiding ordinary text.
"""

from __future__ import annotations

import base64
import bisect
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

SHORT = 8
"""A secret shorter than this is matched only whole and exactly."""
FRAGMENT_CAP = 24
"""A run this long of a longer shape is always redacted, however long the secret."""

KEEP = True
"""In a :data:`EVENT_SKELETON`: the runtime made this value; it is left as it is."""

EVENT_SKELETON: Mapping[str, Any] = {
    # identifiers, hashes, numbers and states the runtime itself makes: the fold,
    # the chain and the workspace depend on them staying exactly as made, and
    # nothing the model or a tool wrote is in them
    **dict.fromkeys(
        (
            "call_id", "timer_id", "approval_id", "proposal_id", "violation_id", "snapshot_id",
            "idempotency_key", "context_hash", "context_events", "provenance", "args_hash",
            "step", "action", "due_at", "to_version", "epoch", "version", "usage",
            "status", "effect", "resolution", "ok", "rerun", "refused", "tainted", "known",
            "manifest", "manifest_digest", "changed", "removed", "paths", "reverted",
            "recreated", "restored", "files", "bytes", "stored_bytes",
            "certificate", "public_key",
        ),
        KEEP,
    ),
    "actions": {"type": KEEP, "call_id": KEEP},
    "verdict": dict.fromkeys(
        ("decision", "grant", "approval", "policy_version", "autonomy", "monitored", "network"),
        KEEP,
    ),
}  # fmt: skip
"""What of an event's data is never redacted (a key maps to KEEP or to the same for
the dict, or each dict of the list, under it); everything else is."""


def fragment_length(n: int) -> int:
    """The shortest run of a shape ``n`` characters long that is redacted.

    The whole shape if it is at most :data:`SHORT` long; otherwise half of it
    (rounded down), but at least :data:`SHORT` and at most :data:`FRAGMENT_CAP`:
    so both halves of a value cut in two are hidden, and the longer part of any cut.
    """
    if n <= SHORT:
        return n
    return max(SHORT, min(n // 2, FRAGMENT_CAP))


_URLSAFE = str.maketrans("+/", "-_")


def shapes(secret: str) -> list[str]:
    """Every shape of ``secret`` that is looked for (case aside), the secret first."""
    escaped = [json.dumps(secret, ensure_ascii=a)[1:-1] for a in (False, True)]
    if len(secret) < SHORT:
        return _unique([secret, *escaped])
    raw = secret.encode()
    found = [secret, secret.upper(), secret.lower(), secret[::-1], *escaped]
    found += [quote(secret, safe=""), quote_plus(secret, safe="")]  # upper/lower: for ß → SS
    found.append(raw.hex())
    for shift in range(3):
        # inside a longer stream the value starts 0, 1 or 2 bytes into a group of
        # three; keep only the characters its own bits decide
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        if shift:
            encoded = encoded[math.ceil(8 * shift / 6) : 8 * (shift + len(raw)) // 6]
        found += [encoded, encoded.translate(_URLSAFE)]
    return _unique(s for s in found if len(s) >= SHORT)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(s for s in items if s))


def _fold(c: str) -> str:
    # through upper case first, so the micro sign and the Greek mu fold alike; a
    # fold never changes a length, so positions in folded text are the text's
    for folded in (c.upper().lower(), c.lower()):
        if len(folded) == 1:
            return folded
    return c


@dataclass(frozen=True, slots=True)
class _Shape:
    name: str
    text: str  # compared as written when exact, else folded
    need: int
    exact: bool


class Redactor:
    """Hides every shape of a set of secrets in text and in JSON-like values.

    Built once (the shapes, their windows and one pattern that finds where any of
    them may start); :meth:`text`, :meth:`value` and :meth:`event` then only scan.
    """

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self.secrets = dict(secrets)
        self._shapes: list[_Shape] = []
        # folded window -> (shape, offset): a run of ``need`` characters of a shape
        # always holds one of its windows, which sit every ``step`` characters
        self._windows: dict[str, list[tuple[int, int]]] = {}
        for name, secret in sorted(self.secrets.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            if not secret:
                continue
            exact = len(secret) < SHORT
            seen: set[str] = set()
            for shape in shapes(secret):
                folded = shape if exact else "".join(map(_fold, shape))
                if folded in seen:
                    continue  # the same shape in another case
                seen.add(folded)
                need = fragment_length(len(shape))
                step = max(1, need // 2)
                width = need - step + 1
                index = len(self._shapes)
                self._shapes.append(_Shape(name, folded, need, exact))
                for offset in range(0, len(shape) - width + 1, step):
                    key = "".join(map(_fold, shape[offset : offset + width]))
                    self._windows.setdefault(key, []).append((index, offset))
        self._widths = sorted({len(k) for k in self._windows}, reverse=True)
        # what redaction writes: a run inside one of these is already hidden, so
        # redacting again changes nothing (``TOKEN`` = "TOKEN" stays ``[secret:TOKEN]``)
        names = "|".join(map(re.escape, sorted(self.secrets)))
        self._held = re.compile(rf"\[secret:(?:{names})\]")
        self._find = (
            re.compile(_pattern(_trie(self._windows)), re.IGNORECASE) if self._windows else None
        )

    def __bool__(self) -> bool:
        return self._find is not None

    # -- text -------------------------------------------------------------------

    def text(self, text: str) -> str:
        """``text`` with every run of a secret's shape replaced by ``[secret:NAME]``."""
        return self._leaves([text])[0] if self else text

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """Where runs of a secret's shape are in ``text``: (start, end, name), by start."""
        found: list[tuple[int, int, str]] = []
        if self._find is None:
            return found
        pos = 0
        low = ""  # the text folded, once, at the first place a shape may start
        held: list[tuple[int, int]] = []
        while (m := self._find.search(text, pos)) is not None:
            p = m.start()
            if not low:
                low = "".join(map(_fold, text))
                held = [h.span() for h in self._held.finditer(text)]
            best: tuple[int, int, str] | None = None
            for width in self._widths:
                if p + width > len(text):
                    continue
                for index, offset in self._windows.get(low[p : p + width], ()):
                    span = self._extend(text, low, p, width, index, offset)
                    if span is not None and (best is None or span[1] - span[0] > best[1] - best[0]):
                        best = span
            if best is not None and not any(a <= best[0] and best[1] <= b for a, b in held):
                found.append(best)
            pos = p + 1  # not the span's end: another shape may start inside it
        return found

    def _extend(
        self, text: str, low: str, p: int, width: int, index: int, offset: int
    ) -> tuple[int, int, str] | None:
        """The longest run around a window hit that follows the shape, if long enough.

        ``low`` is ``text`` folded (same length): an exact shape is compared with
        the text as written, any other with the folded text.
        """
        shape = self._shapes[index]
        ref = shape.text
        seen = text if shape.exact else low
        if seen[p : p + width] != ref[offset : offset + width]:
            return None
        start, at = p, offset
        while start > 0 and at > 0 and seen[start - 1] == ref[at - 1]:
            start, at = start - 1, at - 1
        end, at = p + width, offset + width
        while end < len(text) and at < len(ref) and seen[end] == ref[at]:
            end, at = end + 1, at + 1
        return (start, end, shape.name) if end - start >= shape.need else None

    def _leaves(self, leaves: list[str]) -> list[str]:
        """The strings redacted as one text, in their order and in reverse.

        A line end closing a string is left out of the joined text: a command that
        prints part of a value to stdout and the rest to stderr ends both with one.
        """
        hidden: list[list[tuple[int, int, str]]] = [[] for _ in leaves]
        trimmed = [s.rstrip("\r\n") for s in leaves] if len(leaves) > 1 else leaves
        orders = [list(range(len(leaves)))]
        if len(leaves) > 1:
            orders.append(orders[0][::-1])
        for order in orders:
            starts, joined = [], []
            at = 0
            for i in order:
                starts.append(at)
                joined.append(trimmed[i])
                at += len(trimmed[i])
            for start, end, name in self.spans("".join(joined)):
                k = bisect.bisect_right(starts, start) - 1
                while k < len(order) and starts[k] < end:
                    i, base = order[k], starts[k]
                    lo, hi = max(start, base) - base, min(end, base + len(trimmed[i])) - base
                    if lo < hi:
                        hidden[i].append((lo, hi, name))
                    k += 1
        return [_replace(s, h) if h else s for s, h in zip(leaves, hidden, strict=True)]

    # -- values -----------------------------------------------------------------

    def value(self, value: Any, keep: Mapping[str, Any] | None = None) -> Any:
        """``value`` with every secret in it hidden; parts ``keep`` names are left as they are.

        Every string is redacted, its keys each on their own, the strings (not the
        keys) all together as one text; a number or other scalar whose text holds a
        secret becomes the redacted text. Redacting the value's JSON text instead
        could cut a number in two and leave no valid JSON at all.
        """
        if not self:
            return value
        leaves: list[str] = []
        _collect(value, keep, leaves)
        return self._rebuild(value, keep, iter(self._leaves(leaves)))

    def event(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """An event's data as the journal keeps it (see :data:`EVENT_SKELETON`)."""
        return dict(self.value(data, EVENT_SKELETON)) if self else dict(data)

    def _rebuild(self, value: Any, keep: Mapping[str, Any] | None, leaves: Iterator[str]) -> Any:
        if isinstance(value, str):
            return next(leaves)
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                sub = keep.get(k) if keep is not None else None
                if _kept(v, sub):
                    out[k] = v
                elif sub is not None or not isinstance(k, str):
                    out[k] = self._rebuild(v, sub, leaves)
                else:
                    out[self.text(k)] = self._rebuild(v, None, leaves)
            return out
        if isinstance(value, list | tuple):
            return [self._rebuild(v, keep, leaves) for v in value]
        if value is None or isinstance(value, bool):
            return value
        text = str(value)
        hidden = self.text(text)
        return value if hidden == text else hidden


def _collect(value: Any, keep: Mapping[str, Any] | None, leaves: list[str]) -> None:
    if isinstance(value, str):
        leaves.append(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            sub = keep.get(k) if keep is not None else None
            if not _kept(v, sub):
                _collect(v, sub, leaves)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect(v, keep, leaves)


def _kept(value: Any, keep: Any) -> bool:
    # a scalar where the skeleton expects a structure is the runtime's too (a
    # reconciled call's verdict is a word, a gate's verdict a dict)
    return keep is KEEP or (keep is not None and not isinstance(value, Mapping | list | tuple))


def _replace(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with the (possibly overlapping) spans merged and each replaced once."""
    parts, at = [], 0
    for start, end, name in sorted(spans):
        if end <= at:
            continue
        if start >= at:
            parts += [text[at:start], f"[secret:{name}]"]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _trie(keys: Iterable[str]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for key in keys:
        node = root
        for c in key:
            node = node.setdefault(c, {})
        node[""] = {}
    return root


def _pattern(node: Mapping[str, Any]) -> str:
    """A regex that matches where any key of the trie starts (one key is enough)."""
    if "" in node:
        return ""
    branches = []
    for c, child in sorted(node.items()):
        literal = re.escape(c)
        while len(child) == 1 and "" not in child:  # a chain without choices: one literal
            ((c2, child),) = child.items()
            literal += re.escape(c2)
        branches.append(literal + _pattern(child))
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
