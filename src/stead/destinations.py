"""Where a vault secret may be sent: the hosts it is bound to.

Whoever writes a secret names the hosts stead may send it to (``stead secret
set NAME --to api.github.com,*.example.com``, or ``--provider openai``): a
model's API key goes to the model's ``base_url``, and an MCP server's header
secrets to the server's ``url``, only when that URL's host is one of them. The
list is sealed with the value (:mod:`stead.sandbox.secrets`), so a writer of
the database cannot widen it, and a spec (an operator's, one sent over HTTP)
cannot send an admin's token to a server of its own.

A secret with no list (every secret written before secrets were bound, and one
written without ``--to``) goes only where nobody had to choose a host: as a
model's key, to its provider's own endpoint (``api.openai.com``,
``api.anthropic.com``); never to an MCP server's URL. Tools that declare a
secret get it as before: they are the operator's code, and the secret never
passes through a URL of the spec's choosing.

This module is plain values (no vault, no store), so the models and the tools
can both check a destination without reaching the sandbox's vault.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import SecretError

MAX_HOSTS = 32
PROVIDER_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
"""The host of each provider's own endpoint: where an unbound model key may go,
and what ``--provider NAME`` binds a secret to."""
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME = re.compile(rf"^(?:\*\.)?{_LABEL}(?:\.{_LABEL})*$")


@dataclass(frozen=True, slots=True)
class Bound:
    """A secret's value and the hosts it may be sent to (None: bound to none)."""

    value: str
    to: tuple[str, ...] | None = None


def check_hosts(hosts: Iterable[str]) -> tuple[str, ...]:
    """``hosts`` as stored: lower-case names, IP addresses, or ``*.domain`` for any
    name under a domain; a URL, a port, a path or a bare ``*`` is refused."""
    found: list[str] = []
    for given in hosts:
        host = given.strip().lower().rstrip(".")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not _is_ip(host) and (not _HOSTNAME.match(host) or len(host) > 253):
            raise SecretError(
                f"{given!r} is not a host a secret may be bound to; name a host (api.github.com), "
                "an IP address (127.0.0.1) or every host under a domain (*.example.com), "
                "without a scheme, port or path"
            )
        if host not in found:
            found.append(host)
    if not found:
        raise SecretError("a secret's hosts are empty; name at least one host")
    if len(found) > MAX_HOSTS:
        raise SecretError(f"a secret may be bound to at most {MAX_HOSTS} hosts")
    return tuple(found)


def provider_hosts(provider: str) -> tuple[str, ...]:
    """The hosts ``--provider NAME`` stands for."""
    if provider not in PROVIDER_HOSTS:
        raise SecretError(
            f"provider {provider!r} is not one stead knows; use {' or '.join(PROVIDER_HOSTS)}, "
            "or name the hosts with --to"
        )
    return (PROVIDER_HOSTS[provider],)


def host_of(url: str) -> str:
    """The lower-case host of ``url`` ("" when it has none)."""
    try:
        return (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return ""


def allows(to: Iterable[str], host: str) -> bool:
    """Whether ``host`` is one of ``to``: the same name or address, or a name under a
    ``*.domain`` of it (``*.example.com`` allows ``a.example.com``, not ``example.com``)."""
    host = host.lower().rstrip(".")
    if not host:
        return False
    for allowed in to:
        if allowed == host:
            return True
        if allowed.startswith("*.") and not _is_ip(host) and host.endswith(allowed[1:]):
            return True
    return False


def check_destination(name: str, secret: Bound, url: str, use: str, default: str = "") -> str:
    """``secret``'s value, if it may be sent to ``url`` as ``use`` (a model's key, an
    MCP server's header); ``default`` is the host an unbound secret may go to there.

    Raises a :class:`SecretError` naming the secret, the host and how to allow it.
    """
    host = host_of(url)
    to = secret.to if secret.to is not None else ((default,) if default else ())
    if allows(to, host):
        return secret.value
    if secret.to is None:
        where = (
            f"it is bound to no host, so it goes only to {default}" if default
            else "it is bound to no host, and such a secret is never sent to a URL"
        )  # fmt: skip
    else:
        where = f"it may go only to {', '.join(secret.to)}"
    raise SecretError(
        f"secret {name} may not be sent to {host or url!r} ({use}): {where}; whoever may write "
        f"secrets can allow it with `stead secret set {name} --to {host or 'HOST'}` "
        f'(or PUT /v1/secrets/{name} with "to"), or the spec must name another secret'
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
