"""Where a webhook may be sent: a tenant's admin names the URL, the host posts to it.

So a webhook must not become a way into the operator's own network (SSRF). By
default a delivery is refused unless **every** address its host name resolves
to is a global one: no loopback, private (RFC 1918, unique-local), shared
(100.64/10), link-local (so no cloud metadata at 169.254.169.254), multicast,
reserved or unspecified address, IPv4-mapped ones judged as the IPv4 inside.
The name is resolved at delivery time, each address checked, and the
connection made to the checked address itself (:class:`Target`: the URL's
host replaced by the address, the name kept for ``Host`` and TLS), so a DNS
answer that changes between the check and the connection (rebinding) changes
nothing. Redirects are never followed.

The operator may allow chosen networks (:data:`ALLOW_ENV`, e.g.
``STEAD_WEBHOOK_ALLOW=127.0.0.1,10.0.0.0/8``, or ``--webhook-allow``). Plain
``http://`` is sent only to allowed networks; anywhere else needs ``https://``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import UsageError, WebhookRefused

ALLOW_ENV = "STEAD_WEBHOOK_ALLOW"
MAX_URL = 2048
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]


def allowed_networks(
    text: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Network, ...]:
    """The networks the operator allows (``text``, else :data:`ALLOW_ENV`)."""
    if text is None:
        text = (os.environ if environ is None else environ).get(ALLOW_ENV, "")
    out: list[Network] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise UsageError(
                f"{ALLOW_ENV}: {part!r} is not an address or network; write them like "
                "127.0.0.1,10.0.0.0/8,fd00::/8"
            ) from None
    return tuple(out)


def _plain(ip: Address) -> Address:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def refusal(ip: Address, allowed: Sequence[Network]) -> str | None:
    """Why ``ip`` may not be sent to (None: it may)."""
    ip = _plain(ip)
    if any(ip in net for net in allowed):
        return None
    if ip.is_multicast or not ip.is_global:
        return f"{ip} is not a public address (loopback, private, link-local or reserved)"
    return None


@dataclass(frozen=True, slots=True)
class Target:
    """A URL's destination, pinned: connect to ``url`` (its host is the checked
    address), send ``host`` as the ``Host`` header and, over TLS, as the name the
    certificate must carry (``sni``)."""

    url: str
    host: str
    sni: str | None
    address: str


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a webhook URL, or :class:`UsageError` saying what is wrong."""
    if len(url) > MAX_URL or any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise UsageError(
            f"a webhook URL is at most {MAX_URL} characters without spaces or control characters"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http"):
        raise UsageError(f"a webhook URL is https:// (or http:// to allowed networks), not {url!r}")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise UsageError("a webhook URL carries no user, password or #fragment")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UsageError(f"the port of the webhook URL {url!r} is not a port number") from None
    host = parts.hostname or ""
    if not host:
        raise UsageError(f"the webhook URL {url!r} names no host")
    return parts.scheme, host, port


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system's resolver)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookRefused(f"cannot resolve {host}: {exc}") from None
    return sorted({str(info[4][0]) for info in found})


def pin(url: str, allowed: Sequence[Network], resolve: Resolver = system_resolver) -> Target:
    """Resolve ``url``'s host, check every address, and pin the first; or
    :class:`WebhookRefused` saying which address is not allowed."""
    try:
        scheme, host, port = check_url(url)
    except UsageError as exc:
        raise WebhookRefused(str(exc)) from None
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        addresses = [ipaddress.ip_address(a.split("%")[0]) for a in resolve(host, port)]
    if not addresses:
        raise WebhookRefused(f"{host} resolves to no address")
    for ip in addresses:
        why = refusal(ip, allowed)
        if why is not None:
            raise WebhookRefused(
                f"webhook to {host} refused: {why}; an operator may allow a network with "
                f"{ALLOW_ENV}"
            )
    if scheme == "http" and not all(any(_plain(ip) in n for n in allowed) for ip in addresses):
        raise WebhookRefused(
            f"webhook to {host} refused: plain http:// is sent only to networks the operator "
            f"allows ({ALLOW_ENV}); use https://"
        )
    chosen = _plain(addresses[0])
    literal = f"[{chosen}]" if chosen.version == 6 else str(chosen)
    parts = urlsplit(url)
    default = 443 if scheme == "https" else 80
    netloc = literal if port == default else f"{literal}:{port}"
    pinned = parts._replace(netloc=netloc).geturl()
    shown_host = parts.netloc.rsplit("@", 1)[-1]
    return Target(pinned, shown_host, host if scheme == "https" else None, str(chosen))
