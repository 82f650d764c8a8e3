"""Standard Webhooks signatures, and the signing secret as stored.

Each delivery carries ``webhook-id`` (the outbox row's id, the same on every
retry), ``webhook-timestamp`` (seconds) and ``webhook-signature``:
``v1,`` + base64 of HMAC-SHA256 over ``"{id}.{timestamp}.{body}"``, keyed with
the bytes the secret ``whsec_<base64>`` encodes (https://www.standardwebhooks.com/).

The secret is shown once, when the webhook is made, and must be kept in a form
that can sign again: a digest will not do. With a vault key
(``STEAD_SECRET_KEY``, :mod:`stead.sandbox.secrets`) it is sealed with AES-GCM,
bound to its tenant and webhook id (``sealed:`` rows); without one it is kept
plain (``plain:`` rows), as docs/guide/webhooks.md says, and ``stead webhook add`` warns.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import SecretError

PREFIX = "whsec_"
_SEALED = "sealed:"
_PLAIN = "plain:"


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_bytes(secret: str) -> bytes:
    """The key a ``whsec_`` secret encodes."""
    try:
        return base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise SecretError("a webhook secret is whsec_ and base64; this one is not") from None


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header's value for one delivery."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    mac = hmac.new(secret_bytes(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def _aad(tenant: str, hook_id: str) -> bytes:
    return f"stead-webhook\x00{tenant}\x00{hook_id}".encode()


def seal(secret: str, tenant: str, hook_id: str, key: bytes | None) -> str:
    """``secret`` as its row keeps it: sealed under ``key``, or plain without one."""
    if key is None:
        return _PLAIN + secret
    nonce = os.urandom(12)
    sealed = AESGCM(key).encrypt(nonce, secret.encode(), _aad(tenant, hook_id))
    return _SEALED + base64.b64encode(nonce + sealed).decode()


def open_secret(stored: str, tenant: str, hook_id: str, key: bytes | None) -> str:
    """The secret a row keeps; :class:`SecretError` if it is sealed and ``key`` cannot open it."""
    if stored.startswith(_PLAIN):
        return stored.removeprefix(_PLAIN)
    if key is None:
        raise SecretError(
            f"webhook {hook_id}'s secret is sealed under the vault key, and this process "
            "has none: set STEAD_SECRET_KEY (or STEAD_SECRET_KEY_FILE) for the deliverer"
        )
    try:
        raw = base64.b64decode(stored.removeprefix(_SEALED), validate=True)
        return AESGCM(key).decrypt(raw[:12], raw[12:], _aad(tenant, hook_id)).decode()
    except (InvalidTag, binascii.Error, ValueError):
        raise SecretError(
            f"webhook {hook_id}'s secret does not open with this vault key (a different key "
            "sealed it, or the row was changed)"
        ) from None
