"""Delivering the outbox: claim what is due, post it, settle it.

:func:`deliver_due` is one pass, for any loop to call (``stead work`` calls it
after each of its passes; the server's worker loop can call it the same way).
It claims due rows (:meth:`~stead.store.webhook_rows.WebhookRows.claim_deliveries`,
held for :attr:`Settings.hold` seconds, so a deliverer killed mid-send loses
nothing: the claim lapses and the next pass takes the row), posts each to its
webhook's pinned address (:mod:`.addresses`) with Standard Webhooks headers
(:mod:`.signing`), and settles it:

* a 2xx answer: delivered;
* anything else (another status, a redirect, which is never followed, no
  answer in time, an address refused): tried again after an exponential
  backoff with jitter from a seeded random, until the row is older than
  :attr:`Settings.give_up_after` (3 days by default; the operator's
  :data:`GIVE_UP_ENV`), when it is marked failed.

Each try is recorded (the status or what failed, and how long it took), and
the row keeps its id, which is every try's ``webhook-id``: delivery is at
least once, and a receiver drops the repeats by that id. Rows delivered or failed are
forgotten :attr:`Settings.keep_for` (30 days) later. Requests have bounded
timeouts and only the first :data:`READ_LIMIT` bytes of an answer are read.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import httpx

from .. import __version__
from ..clock import Clock
from ..errors import SecretError, SteadError, UsageError
from ..ids import new_id
from ..sandbox.secrets import load_key
from ..store.webhook_rows import Attempt, OutboxRow, WebhookRecord, WebhookRows
from . import addresses, signing

READ_LIMIT = 4096
"""The most of an answer read: its status is what counts."""


@dataclass(frozen=True, slots=True)
class Settings:
    """How deliveries are made (the defaults suit a server; tests shorten them)."""

    timeout: float = 10.0
    """Seconds to connect, and between bytes of the answer; a pass waits three times this
    for each try a thread has, then leaves a try that still runs."""
    give_up_after: float = 3 * 86400.0
    """A row older than this after a failed try is marked failed."""
    hold: float = 300.0
    """How long a claim lasts: longer than a pass waits for its tries (12 timeouts)."""
    batch: int = 20
    threads: int = 4
    first_delay: float = 5.0
    max_delay: float = 6 * 3600.0
    keep_for: float = 30 * 86400.0
    """Rows delivered or failed are forgotten (with their attempts) this long after."""


GIVE_UP_ENV = "STEAD_WEBHOOK_GIVE_UP_AFTER"


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """The default :class:`Settings`, with the age a notice is given up at from
    :data:`GIVE_UP_ENV` (seconds), when the operator set it."""
    text = (os.environ if environ is None else environ).get(GIVE_UP_ENV, "").strip()
    if not text:
        return Settings()
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 60 <= seconds <= 90 * 86400:
        raise UsageError(
            f"{GIVE_UP_ENV} is seconds between 60 and {90 * 86400} (e.g. 259200 for 3 days), "
            f"not {text!r}"
        )
    return Settings(give_up_after=seconds)


@dataclass(slots=True)
class DeliveryReport:
    """What one pass did, by outbox row id."""

    delivered: list[str] = field(default_factory=list)
    retrying: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def backoff(attempt: int, settings: Settings, rng: random.Random) -> float:
    """Seconds before try ``attempt + 1``: doubling from ``first_delay`` up to ``max_delay``,
    each scaled by a random factor in [0.5, 1.5) so many rows do not retry in step."""
    base = min(settings.first_delay * 2.0 ** max(attempt - 1, 0), settings.max_delay)
    return float(base * (0.5 + rng.random()))


class Deliverer:
    """Delivers a store's due webhook rows; one per process is enough (claims keep
    several from sending one row at once)."""

    def __init__(
        self,
        store: WebhookRows,
        clock: Clock,
        *,
        settings: Settings | None = None,
        allow: Sequence[addresses.Network] | None = None,
        key: bytes | None = None,
        rng: random.Random | None = None,
        resolve: addresses.Resolver = addresses.system_resolver,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings or settings_from_env()
        self.allow = tuple(addresses.allowed_networks() if allow is None else allow)
        self.key = key
        self.rng = rng or random.Random()
        self.resolve = resolve
        self._client = httpx.Client(
            transport=transport, follow_redirects=False, trust_env=False,
            timeout=httpx.Timeout(self.settings.timeout),
        )  # fmt: skip
        self._pool = ThreadPoolExecutor(self.settings.threads, thread_name_prefix="webhook")
        self._lock = threading.Lock()
        self._busy = 0  # tries running now, some perhaps held by a receiver past the pass
        self._next_prune = 0.0

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def deliver_due(self, now: float | None = None) -> DeliveryReport:
        """Claim the rows due at ``now`` (default: the clock's), post them, settle them."""
        now = self.clock.now() if now is None else now
        report = DeliveryReport()
        if now >= self._next_prune:
            self._next_prune = now + 3600.0  # an hour apart: a delete over an index
            self.store.prune_deliveries(now - self.settings.keep_for)
        with self._lock:
            free = self.settings.threads - self._busy
        if free <= 0:
            return report  # every thread is held by a receiver; their claims lapse
        claim = new_id("clm", self.clock)
        limit = min(self.settings.batch, free * 4)
        rows = self.store.claim_deliveries(claim, now, self.settings.hold, limit)
        if not rows:
            return report
        hooks = {r.hook_id: self.store.get_webhook(r.hook_id) for r in rows}
        tries: dict[Future[tuple[int | None, str, float]], OutboxRow] = {
            self._pool.submit(self._counted, r, hooks.get(r.hook_id)): r for r in rows
        }
        # a pass ends in bounded time, whatever a receiver does: a try still running
        # then (a receiver trickling its headers) is left to end on its own and is
        # not settled, so its claim lapses and a later pass tries the row again
        rounds = -(-len(rows) // free)  # each thread's share of the rows, rounded up
        done, late = wait(tries, timeout=rounds * 3 * self.settings.timeout + 1)
        for future in late:
            future.cancel()  # not started yet: never sent
        for future, row in tries.items():
            if future in done:
                code, error, seconds = future.result()
                self._settle(claim, row, code, error, seconds, report)
        return report

    def _counted(self, row: OutboxRow, hook: WebhookRecord | None) -> tuple[int | None, str, float]:
        with self._lock:
            self._busy += 1
        try:
            return self._try(row, hook)
        finally:
            with self._lock:
                self._busy -= 1

    def _settle(
        self,
        claim: str,
        row: OutboxRow,
        code: int | None,
        error: str,
        seconds: float,
        report: DeliveryReport,
    ) -> None:
        at = self.clock.now()
        attempt = Attempt(row.msg_id, row.attempts + 1, row.hook_id, at, code, error, seconds)
        if code is not None and 200 <= code < 300:
            state, next_at, into = "delivered", at, report.delivered
        else:
            next_at = at + backoff(row.attempts + 1, self.settings, self.rng)
            if next_at - row.created_at > self.settings.give_up_after:
                state, into = "failed", report.failed
            else:
                state, into = "pending", report.retrying
        if self.store.settle_delivery(claim, attempt, state, next_at):
            into.append(row.msg_id)

    def _try(self, row: OutboxRow, hook: WebhookRecord | None) -> tuple[int | None, str, float]:
        """One post of ``row``: (HTTP status or None, what failed, seconds taken)."""
        started = time.monotonic()
        try:
            if hook is None:
                return None, "the webhook was removed", 0.0
            target = addresses.pin(hook.url, self.allow, self.resolve)
            secret = signing.open_secret(hook.secret, hook.tenant, hook.hook_id, self._key())
            code = self._post(target, row, secret)
            error = "" if 200 <= code < 300 else (
                "redirects are not followed" if 300 <= code < 400 else f"answered {code}"
            )  # fmt: skip
            return code, error, time.monotonic() - started
        except SteadError as exc:
            return None, str(exc)[:500], time.monotonic() - started
        except httpx.TimeoutException:
            return None, f"no answer within {self.settings.timeout:g}s", time.monotonic() - started
        except (httpx.HTTPError, httpx.StreamError, OSError, ValueError) as exc:
            # one receiver's failure is that row's attempt, never the pass's end
            what = str(exc) or type(exc).__name__
            return None, f"{type(exc).__name__}: {what}"[:500], time.monotonic() - started

    def _key(self) -> bytes | None:
        if self.key is not None:
            return self.key
        try:
            return load_key()
        except SecretError:
            return None  # a plain secret needs none; a sealed one says so when opened

    def _post(self, target: addresses.Target, row: OutboxRow, secret: str) -> int:
        body = row.body.encode()
        stamp = int(self.clock.now())
        headers = {
            "host": target.host,
            "content-type": "application/json",
            "user-agent": f"stead-webhooks/{__version__}",
            "webhook-id": row.msg_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signing.sign(secret, row.msg_id, stamp, body),
        }
        extensions = {"sni_hostname": target.sni} if target.sni else {}
        request = self._client.build_request(
            "POST", target.url, content=body, headers=headers, extensions=extensions
        )
        deadline = time.monotonic() + 2 * self.settings.timeout
        response = self._client.send(request, stream=True)
        try:
            read = 0
            for chunk in response.iter_raw():
                read += len(chunk)
                if read >= READ_LIMIT or time.monotonic() > deadline:
                    break
            return response.status_code
        finally:
            response.close()


def deliver_due(
    store: WebhookRows,
    clock: Clock,
    *,
    deliverer: Deliverer | None = None,
    settings: Settings | None = None,
    allow: Sequence[addresses.Network] | None = None,
) -> DeliveryReport:
    """One delivery pass over ``store``: the call a worker loop makes each pass. Pass a
    long-lived ``deliverer`` to keep its connections and its random; otherwise one is
    made for this pass (``allow``: else :data:`~.addresses.ALLOW_ENV`) and closed."""
    if deliverer is not None:
        return deliverer.deliver_due()
    made = Deliverer(store, clock, settings=settings, allow=allow)
    try:
        return made.deliver_due()
    finally:
        made.close()
