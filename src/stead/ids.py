"""Time-ordered identifiers.

Ids sort by creation time (48 bits of milliseconds first) and carry 80 random
bits, written in Crockford base32 like a ULID with a short prefix naming what
they identify (``ag_`` for agents, ``act_`` for activations). The random part
comes from a :class:`random.Random` the caller owns, so an activation seeded from
its own entropy produces reproducible ids in tests.
"""

from __future__ import annotations

import os
import random
import re
from typing import TypeGuard

from .clock import Clock
from .errors import UsageError

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _b32(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def new_id(prefix: str, clock: Clock, rng: random.Random | None = None) -> str:
    """Return ``prefix_`` + a 26-character time-ordered id."""
    millis = int(clock.now() * 1000) & ((1 << 48) - 1)
    rand = rng.getrandbits(80) if rng is not None else int.from_bytes(os.urandom(10), "big")
    return f"{prefix}_{_b32(millis, 10)}{_b32(rand, 16)}"


def seeded_rng(seed: str) -> random.Random:
    """A random generator for one activation, seeded from that activation's entropy."""
    return random.Random(seed)


_SHORT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def is_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a short identifier (see :func:`check_id`)."""
    return isinstance(value, str) and bool(_SHORT_ID.fullmatch(value)) and ".." not in value


def check_id(value: str, what: str = "id") -> str:
    """``value`` if it is a short identifier, else a UsageError saying what one is.

    Every id that comes from outside (a command line, a spec, an API call) goes
    through here: it names folders and rows, so it is 1 to 64 letters, digits,
    '.', '_' or '-', starting with a letter or digit, and never ``..``.
    """
    if not is_id(value):
        shown = repr(value) if len(str(value)) <= 80 else f"{str(value)[:40]!r}... (too long)"
        raise UsageError(
            f"{what} {shown} is not allowed: use 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, without '..'"
        )
    return value
