"""Who is calling: API tokens, the roles they carry, and failed attempts held off.

A token reads ``stead.TOKEN_ID.SECRET``. The id finds the stored row (a
:class:`~stead.store.tokens.TokenRecord`); the secret, 256 random bits, is
compared with the stored SHA-256 digest in constant time. A fast digest is
enough for a secret that long (there is nothing to guess), and it keeps a
request's check cheap. The plain token is shown once, when it is made
(``stead token create``), and kept nowhere.

A token carries one tenant and one role. The roles are ordered, each allowing
what the ones before it allow:

* ``viewer``: read the tenant's agents, journals, approvals, certificates;
* ``operator``: also create, run, message and move agents (hibernate, wake,
  fork, export);
* ``approver``: also answer approvals, resolve outcomes, clear violations;
* ``admin``: also change what agents may do (grants, scope, autonomy,
  policies) and write secrets.

So a stolen viewer token cannot approve, and an approver's cannot grant.

Failed attempts are counted per client address (:class:`Attempts`): past
``limit`` in ``window`` seconds, the address's failures are answered "too many
attempts" until the window has passed, and what it sends that is not even
shaped like a token is refused without a look at the store. A valid token is
never held off, wherever it comes from: its secret leaves nothing to guess,
so holding it off would only let anyone sharing its address (a proxy, a
network's NAT) lock its holder out. Failures go to the operator's log with the
address and why (never what was presented), boundedly. The address is the
connection's unless the operator names the proxies whose ``X-Forwarded-For``
is believed (``stead serve --forwarded-allow-ips``).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass

from ..clock import Clock
from ..errors import UsageError
from ..ids import check_id, new_id
from ..store.tokens import ROLES, TokenRecord, TokenRows

ACTIONS = {"read": "viewer", "operate": "operator", "approve": "approver", "govern": "admin"}
"""The least role each kind of request needs."""
_TOKEN = re.compile(r"stead\.(tok_[0-9A-Z]{26})\.([A-Za-z0-9_-]{43})")
_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,100}")


def allows(role: str, action: str) -> bool:
    """Whether ``role`` may make a request of kind ``action`` (a key of :data:`ACTIONS`)."""
    return ROLES.index(role) >= ROLES.index(ACTIONS[action])


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def mint(
    rows: TokenRows, tenant: str, role: str, name: str, clock: Clock
) -> tuple[str, TokenRecord]:
    """Make and store a token; return it in plain (shown once) and as stored."""
    check_id(tenant, "--tenant")
    if role not in ROLES:
        raise UsageError(f"--role is one of {', '.join(ROLES)}, not {role!r}")
    if not _NAME.fullmatch(name):
        raise UsageError(
            "--name is 1 to 100 characters without control characters: who holds the "
            "token, recorded with every approval it gives"
        )
    secret = secrets.token_urlsafe(32)
    record = TokenRecord(new_id("tok", clock), tenant, role, name, _digest(secret), clock.now())
    rows.put_token(record)
    return f"stead.{record.token_id}.{secret}", record


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a presented token was not accepted (for the operator's log)."""

    reason: str
    token_id: str | None = None


def shaped_like_a_token(presented: str) -> bool:
    """Whether ``presented`` reads ``stead.TOKEN_ID.SECRET`` (whatever its secret)."""
    return _TOKEN.fullmatch(presented) is not None


def authenticate(rows: TokenRows, presented: str) -> TokenRecord | Refusal:
    """The live token ``presented`` is, or why it is not one."""
    match = _TOKEN.fullmatch(presented)
    if match is None:
        return Refusal("not a stead token")
    token_id, secret = match.groups()
    record = rows.get_token(token_id)
    if record is None:
        return Refusal("no such token", token_id)
    if not hmac.compare_digest(record.digest, _digest(secret)):
        return Refusal("wrong secret", token_id)
    if record.revoked_at is not None:
        return Refusal("revoked", token_id)
    return record


class Attempts:
    """Failed authentications per client, in a sliding window, in bounded memory.

    A client is its address, or its /64 for IPv6 (the least a host is given, so
    one host cannot make itself fresh addresses). Only the last ``limit``
    failures of each client are kept, and at most ``clients`` clients, the
    least recently failed forgotten first: an attacker with many addresses can
    make this forget, never grow. A failure is written to the operator's log
    while its client is not held off; the one that finds it held off is written
    once more, saying so, and then nothing until the window has passed; and at
    most ``log_limit`` rows are written in any window, whatever the number of
    clients.
    """

    def __init__(
        self,
        clock: Clock,
        limit: int = 10,
        window: float = 60.0,
        clients: int = 10_000,
        log_limit: int = 600,
    ) -> None:
        self._clock = clock
        self.limit = limit
        self.window = window
        self.clients = clients
        self.log_limit = log_limit
        self._lock = threading.Lock()
        self._failed: OrderedDict[str, deque[float]] = OrderedDict()
        self._told: dict[str, float] = {}  # when a client's hold-off was last logged
        self._logged: deque[float] = deque()

    def __len__(self) -> int:
        return len(self._failed)

    def clear(self) -> None:
        with self._lock:
            self._failed.clear()
            self._told.clear()
            self._logged.clear()

    @staticmethod
    def client(address: str) -> str:
        """The key ``address`` is counted under: itself, or its /64 for IPv6."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return address
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.ipv4_mapped is not None:
                return str(ip.ipv4_mapped)
            return str(ipaddress.IPv6Network((ip, 64), strict=False))
        return str(ip)

    def _wait(self, key: str, now: float) -> float:
        times = self._failed.get(key)
        if times is None or len(times) < self.limit:
            return 0.0
        return max(0.0, times[0] + self.window - now)

    def held_off(self, address: str) -> float:
        """Seconds until ``address`` may fail again without being held off (0: now)."""
        with self._lock:
            return self._wait(self.client(address), self._clock.now())

    def failed(self, address: str) -> str | None:
        """Count a failure from ``address``; the kind of row it is worth in the
        operator's log (``auth_failed``, ``auth_held_off``), or None for none."""
        now = self._clock.now()
        key = self.client(address)
        with self._lock:
            held = self._wait(key, now) > 0
            times = self._failed.pop(key, None) or deque(maxlen=self.limit)
            times.append(now)
            self._failed[key] = times  # the most recent last
            while len(self._failed) > self.clients:
                gone, _ = self._failed.popitem(last=False)
                self._told.pop(gone, None)
            kind: str | None = "auth_failed"
            if held:
                told = self._told.get(key)
                kind = "auth_held_off" if told is None or told <= now - self.window else None
            while self._logged and self._logged[0] <= now - self.window:
                self._logged.popleft()
            if kind is None or len(self._logged) >= self.log_limit:
                return None
            if held:
                self._told[key] = now
            self._logged.append(now)
            return kind
