"""The secrets vault: encrypted at rest, scoped, injected per run, redacted.

A secret belongs to a tenant, and optionally to one agent of it (an agent's
own secret wins over the tenant's of the same name). Values are sealed with
AES-256-GCM under the vault key before the store sees them; the associated
data binds each ciphertext to its tenant, agent and name, so a sealed value
copied to another row does not open. A secret written with hosts
(:mod:`stead.destinations`) is sealed with them: the row holds ``v2:`` and the
ciphertext of ``{"value": ..., "to": [...]}`` under associated data of its own,
so neither the list nor the format can be changed without the key (a ``v2`` row
stripped of its mark does not open as an unbound one). The key comes from ``STEAD_SECRET_KEY``
(base64 of 32 bytes) or the file named by ``STEAD_SECRET_KEY_FILE``; stead
never writes it next to the store.

A tool declares the secret names it needs (``@stead.tool(secrets=["TOKEN"])``);
only those reach it, in ``ctx.secrets``, for that one call. Whatever a tool
returns, and everything the model writes, is redacted before it is journaled
(see :mod:`.redaction`), so a value that comes back out, whole, in part or
encoded, is recorded as ``[secret:NAME]``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..destinations import Bound, check_destination, check_hosts
from ..errors import SecretError
from ..ports import SecretRows
from ..redaction import Redactor

KEY_ENV = "STEAD_SECRET_KEY"
KEY_FILE_ENV = "STEAD_SECRET_KEY_FILE"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_BOUND = "v2:"
"""Marks a row sealed with its hosts; base64 (the unbound rows) never holds a ':'."""


def new_key() -> str:
    """A fresh vault key, base64, for ``stead secret keygen``."""
    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()


def load_key(environ: Mapping[str, str] | None = None) -> bytes:
    """The vault key from the environment or its key file; explain what is missing."""
    env = os.environ if environ is None else environ
    text = env.get(KEY_ENV)
    source = f"${KEY_ENV}"
    if not text and env.get(KEY_FILE_ENV):
        path = Path(env[KEY_FILE_ENV])
        source = str(path)
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError as exc:
            raise SecretError(f"cannot read the vault key file {path}: {exc.strerror}") from exc
    if not text:
        raise SecretError(
            f"no vault key: set {KEY_ENV} to a key, or {KEY_FILE_ENV} to a file holding one "
            "(make one with `stead secret keygen`)"
        )
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise SecretError(
            f"the vault key in {source} is not base64 of 32 bytes; make one "
            "with `stead secret keygen`"
        )
    return key


def key_file_warning(environ: Mapping[str, str] | None = None) -> str | None:
    """What is wrong with the vault key file's permissions, if one is named; else None.

    Whoever can read the key can open every secret of every tenant, so the file
    must be readable by its owner only.
    """
    env = os.environ if environ is None else environ
    named = env.get(KEY_FILE_ENV)
    if not named:
        return None
    path = Path(named)
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot read the vault key file {path} (${KEY_FILE_ENV}): {exc.strerror}"
    who = [w for w, bits in (("its group", 0o070), ("others", 0o007)) if mode & bits]
    if not who:
        return None
    return (
        f"the vault key file {path} (${KEY_FILE_ENV}) is open to {' and '.join(who)} "
        f"(mode {stat.S_IMODE(mode):04o}); whoever can read it can open every secret: "
        f"make it readable by its owner only with `chmod 600 {path}`"
    )


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise SecretError(
            f"secret name {name!r} is not allowed; use letters, digits and "
            "'_', starting with a letter, like API_TOKEN"
        )
    return name


class Vault:
    """Seals and opens secrets held in a store."""

    def __init__(self, store: SecretRows, key: bytes) -> None:
        self._store = store
        self._aead = AESGCM(key)
        # a key of its own for marks (HMAC), derived: never the sealing key itself
        self._mac_key = hashlib.sha256(b"stead-mac\x00" + key).digest()

    def mark(self, purpose: str, data: bytes) -> str:
        """HMAC-SHA256 of ``data`` for ``purpose``: rows that only the vault key's
        holder could have written (long-term memories' sources, say)."""
        message = purpose.encode() + b"\x00" + data
        return hmac.new(self._mac_key, message, hashlib.sha256).hexdigest()

    @staticmethod
    def _aad(tenant: str, agent_id: str, name: str, bound: bool = False) -> bytes:
        mark = "stead-secret-v2" if bound else "stead-secret"
        return f"{mark}\x00{tenant}\x00{agent_id}\x00{name}".encode()

    def set(
        self,
        tenant: str,
        name: str,
        value: str,
        *,
        agent_id: str = "",
        at: float,
        to: Sequence[str] | None = None,
    ) -> None:
        """Seal ``value``; with ``to``, bound to those hosts (see :mod:`stead.destinations`)."""
        check_name(name)
        if not value:
            raise SecretError(f"secret {name}: the value is empty; pass it on standard input")
        hosts = check_hosts(to) if to is not None else None
        self._seal(tenant, agent_id, name, value, at, hosts)

    def set_reserved(self, tenant: str, name: str, value: str, *, agent_id: str, at: float) -> None:
        """Seal a value only the runtime names (``stead.…``), such as an agent's signing key.

        Such names fail :func:`check_name`, so no person, spec or tool can set or
        be given them.
        """
        if not name.startswith("stead."):
            raise SecretError(f"{name!r} is not a reserved name; use set()")
        self._seal(tenant, agent_id, name, value, at, None)

    def _seal(
        self,
        tenant: str,
        agent_id: str,
        name: str,
        value: str,
        at: float,
        to: tuple[str, ...] | None,
    ) -> None:
        nonce = os.urandom(12)
        if to is None:
            plain, mark = value.encode(), ""
        else:
            plain, mark = json.dumps({"value": value, "to": list(to)}).encode(), _BOUND
        sealed = self._aead.encrypt(nonce, plain, self._aad(tenant, agent_id, name, bool(mark)))
        text = mark + base64.b64encode(nonce + sealed).decode()
        self._store.put_secret(tenant, agent_id, name, text, at)

    def _open(self, tenant: str, agent_id: str, name: str, sealed: str) -> Bound:
        bound = sealed.startswith(_BOUND)
        try:
            raw = base64.b64decode(sealed.removeprefix(_BOUND), validate=True)
            plain = self._aead.decrypt(raw[:12], raw[12:], self._aad(tenant, agent_id, name, bound))
        except (InvalidTag, binascii.Error, ValueError):
            raise SecretError(
                f"secret {name} does not open with this vault key (a different "
                "key sealed it, or it was tampered with)"
            ) from None
        if not bound:
            return Bound(plain.decode())
        data = json.loads(plain)
        return Bound(str(data["value"]), tuple(str(h) for h in data["to"]))

    def find(self, tenant: str, agent_id: str, name: str) -> Bound | None:
        """``name`` as an agent sees it, with its hosts: its own, else its tenant's, else None."""
        for scope in (agent_id, ""):
            sealed = self._store.get_secret(tenant, scope, name)
            if sealed is not None:
                return self._open(tenant, scope, name, sealed)
        return None

    def get(self, tenant: str, agent_id: str, name: str) -> str | None:
        """The value an agent sees for ``name``: its own, else its tenant's, else None."""
        found = self.find(tenant, agent_id, name)
        return None if found is None else found.value

    def for_call(
        self, tenant: str, agent_id: str, names: Iterable[str], *, url: str | None = None
    ) -> dict[str, str]:
        """Exactly the declared secrets for one call; refuse if one is not set, or, when
        they are sent to ``url`` (an MCP server's), if one is not bound to its host."""
        values = {}
        for name in names:
            check_name(name)  # a reserved name (an agent's signing key) is never handed out
            found = self.find(tenant, agent_id, name)
            if found is None:
                raise SecretError(
                    f"the tool needs secret {name}, which is not set for agent {agent_id} or "
                    f"its tenant {tenant}; set it with `stead secret set {name}`"
                )
            if url is not None:
                check_destination(name, found, url, "the URL of an MCP server")
            values[name] = found.value
        return values


def openable(
    vault: Callable[[], Vault] | None, tenant: str, agent_id: str, names: Iterable[str]
) -> dict[str, str]:
    """The values of ``names`` this vault can open for the agent; the rest are skipped.

    For redaction, never for handing out: without a key nothing could have been
    decrypted, and a secret sealed under another key was never handed to a tool
    under this one, so neither is anything to hide.
    """
    if vault is None:
        return {}
    try:
        opened = vault()
    except SecretError:
        return {}
    found: dict[str, str] = {}
    for name in sorted(names):
        with contextlib.suppress(SecretError):
            value = opened.get(tenant, agent_id, name)
            if value:
                found[name] = value
    return found


def redact(value: Any, secrets: Mapping[str, str]) -> Any:
    """``value`` with every secret in it, in any shape :mod:`.redaction` knows,
    replaced by ``[secret:NAME]``.

    A one-off: an activation keeps one :class:`~.redaction.Redactor`, which derives
    the shapes once, instead of calling this for every result.
    """
    return Redactor(secrets).value(value) if secrets else value
