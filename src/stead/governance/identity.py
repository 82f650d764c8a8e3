"""Agent identity: Ed25519 keys and signed envelopes between agents.

Each agent gets its own key pair the first time it needs one. The private key
is sealed in the vault (never in the journal); the public key is journaled
(``identity_created``), so a receiver learns a sender's key from the store,
never from the message.

An envelope is what one agent hands another: a message, a delegation of part
of a grant, or a sub-agent's result::

    {"v": 1, "id": "msg_...", "kind": "message" | "delegation" | "result",
     "from": SENDER, "to": RECEIVER, "tenant": T, "at": SECONDS,
     "body": {...}, "sig": HEX}

The signature covers the canonical JSON of everything but ``sig``. Whatever
the body claims about permissions is never trusted: the receiver checks the
sender's grants in the ledger (see :mod:`stead.messaging.delivery`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ..canonical import dumps
from ..errors import GovernanceError

ENVELOPE_VERSION = 1
ENVELOPE_KINDS = ("message", "delegation", "result")
IDENTITY_SECRET = "stead.identity"
"""The vault name of an agent's private key; no tool or person can name it."""
MAX_AGE_SECONDS = 600.0
"""How old an envelope may be when it arrives; older ones are refused as stale."""
MAX_SKEW_SECONDS = 60.0
"""How far in the receiver's future an envelope's time may be."""


def new_key_pair() -> tuple[str, str]:
    """(private key, public key), both as hex of their 32 raw bytes."""
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private.private_bytes_raw().hex(), public.hex()


def public_of(private_hex: str) -> str:
    """The public key (hex) of a private key (hex)."""
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def signed_part(envelope: Mapping[str, Any]) -> bytes:
    return dumps({k: v for k, v in envelope.items() if k != "sig"}).encode()


def sign(private_hex: str, envelope: Mapping[str, Any]) -> dict[str, Any]:
    """``envelope`` with its ``sig``."""
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    return {**envelope, "sig": key.sign(signed_part(envelope)).hex()}


def signature_valid(public_hex: str, envelope: Mapping[str, Any]) -> bool:
    sig = envelope.get("sig")
    if not isinstance(sig, str):
        return False
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex))
        key.verify(bytes.fromhex(sig), signed_part(envelope))
    except (InvalidSignature, ValueError):
        return False
    return True


def check_shape(envelope: Any) -> dict[str, Any]:
    """The envelope if it has every field with the right type, else raise naming the field."""
    if not isinstance(envelope, Mapping):
        raise GovernanceError("an envelope is a JSON object; got " + type(envelope).__name__)
    expected: dict[str, type | tuple[type, ...]] = {
        "v": int,
        "id": str,
        "kind": str,
        "from": str,
        "to": str,
        "tenant": str,
        "at": (int, float),
        "body": dict,
    }
    for key, kind in expected.items():
        if not isinstance(envelope.get(key), kind):
            raise GovernanceError(f"envelope field {key!r} is missing or has the wrong type")
    if type(envelope["v"]) is not int or envelope["v"] != ENVELOPE_VERSION:
        raise GovernanceError(
            f"envelope version {envelope['v']} is not understood; this stead reads "
            f"version {ENVELOPE_VERSION}"
        )
    if envelope["kind"] not in ENVELOPE_KINDS:
        raise GovernanceError(
            f"envelope kind {envelope['kind']!r} is unknown; kinds are {', '.join(ENVELOPE_KINDS)}"
        )
    return dict(envelope)
