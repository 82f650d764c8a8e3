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
``limit`` in ``window`` seconds, the address is refused before its token is
even looked at until the window has passed, and every failure goes to the
operator's log with the address and why (never what was presented).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from collections import deque
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
    """Failed authentications per client address, in a sliding window."""

    def __init__(self, clock: Clock, limit: int = 10, window: float = 60.0) -> None:
        self._clock = clock
        self.limit = limit
        self.window = window
        self._lock = threading.Lock()
        self._failed: dict[str, deque[float]] = {}

    def _recent(self, address: str, now: float) -> deque[float]:
        times = self._failed.setdefault(address, deque())
        while times and times[0] <= now - self.window:
            times.popleft()
        return times

    def held_off(self, address: str) -> float:
        """Seconds until ``address`` may try again (0: it may now)."""
        now = self._clock.now()
        with self._lock:
            times = self._recent(address, now)
            if len(times) < self.limit:
                if not times:
                    self._failed.pop(address, None)  # nothing kept for good callers
                return 0.0
            return max(0.0, times[0] + self.window - now)

    def failed(self, address: str) -> None:
        now = self._clock.now()
        with self._lock:
            self._recent(address, now).append(now)
