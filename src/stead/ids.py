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

from .clock import Clock

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
