"""Adding, listing and removing a tenant's webhooks: what the CLI, the API and the
page share. A webhook of another tenant reads exactly like a missing one."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Sequence
from typing import Any

from ..clock import Clock
from ..errors import NotFound, SecretError, UsageError
from ..ids import check_id, new_id
from ..notices import EVENT_TYPES
from ..sandbox.secrets import load_key
from ..store.webhook_rows import WebhookRecord, WebhookRows
from . import addresses, signing

MAX_HOOKS = 20
"""The most webhooks one tenant may have."""


def rows_of(store: object) -> WebhookRows:
    """The webhook rows of ``store`` (a tenant's view is looked through)."""
    inner = getattr(store, "inner", store)
    if not isinstance(inner, WebhookRows):
        raise UsageError(f"{type(inner).__name__} keeps no webhooks")
    return inner


def check_events(events: Sequence[str] | None) -> tuple[str, ...]:
    """The events named, checked (None or empty: every event)."""
    chosen = [e.strip() for e in events or () if e.strip()] or list(EVENT_TYPES)
    unknown = [e for e in chosen if e not in EVENT_TYPES]
    if unknown:
        raise UsageError(
            f"no webhook event {unknown[0]!r}; the events are {', '.join(EVENT_TYPES)}"
        )
    return tuple(dict.fromkeys(chosen))


def vault_key() -> bytes | None:
    """The vault key, where this process has one (None: secrets are kept plain)."""
    with contextlib.suppress(SecretError):
        return load_key()
    return None


def add(
    rows: WebhookRows,
    tenant: str,
    url: str,
    events: Sequence[str] | None,
    clock: Clock,
    key: bytes | None,
    allow: Sequence[addresses.Network] = (),
) -> tuple[str, WebhookRecord]:
    """Make a webhook; return its secret (shown once, never again) and its row.

    A URL whose host is an address that may not be sent to is refused here
    already; a name is checked at each delivery, where it is resolved.
    """
    check_id(tenant, "tenant")
    scheme, host, _ = addresses.check_url(url)
    with contextlib.suppress(ValueError):
        ip = ipaddress.ip_address(host)
        why = addresses.refusal(ip, allow)
        if why is not None or (scheme == "http" and not any(ip in n for n in allow)):
            raise UsageError(
                f"a webhook to {host} would be refused: "
                f"{why or 'plain http:// goes only to networks the operator allows'}; "
                f"an operator may allow a network with {addresses.ALLOW_ENV}"
            )
    if len(rows.list_webhooks(tenant)) >= MAX_HOOKS:
        raise UsageError(
            f"tenant {tenant} has {MAX_HOOKS} webhooks already; remove one first "
            "(`stead webhook rm ID`)"
        )
    chosen = check_events(events)
    secret = signing.new_secret()
    hook_id = new_id("whk", clock)
    record = WebhookRecord(hook_id, tenant, url, chosen,
                           signing.seal(secret, tenant, hook_id, key), clock.now())  # fmt: skip
    rows.put_webhook(record)
    return secret, record


def find(rows: WebhookRows, tenant: str, hook_id: str) -> WebhookRecord:
    """The tenant's webhook ``hook_id``, or :class:`NotFound` (also for another tenant's)."""
    found = rows.get_webhook(hook_id)
    if found is None or found.tenant != tenant:
        raise NotFound(f"no webhook {hook_id}; `stead webhook ls` lists them")
    return found


def remove(rows: WebhookRows, tenant: str, hook_id: str) -> None:
    find(rows, tenant, hook_id)
    rows.delete_webhook(hook_id)


def described(rows: WebhookRows, record: WebhookRecord) -> dict[str, Any]:
    """A webhook as listed: never its secret; with its latest delivery's status."""
    latest = rows.outbox(record.hook_id, 1)
    last = None
    if latest:
        r = latest[0]
        last = {"msg_id": r.msg_id, "event": r.event, "state": r.state,
                "attempts": r.attempts, "code": r.last_code, "error": r.last_error,
                "at": r.done_at or r.created_at}  # fmt: skip
    return {"hook_id": record.hook_id, "url": record.url, "events": list(record.events),
            "created_at": record.created_at,
            "secret_sealed": not record.secret.startswith("plain:"), "last": last}  # fmt: skip


def listing(rows: WebhookRows, tenant: str) -> list[dict[str, Any]]:
    return [described(rows, h) for h in rows.list_webhooks(tenant)]


def history(rows: WebhookRows, tenant: str, hook_id: str, limit: int = 20) -> dict[str, Any]:
    """The webhook's recent notices (newest first) and its recent attempts."""
    record = find(rows, tenant, hook_id)
    return {**described(rows, record),
            "deliveries": [r.to_json() for r in rows.outbox(hook_id, limit)],
            "attempts": [a.to_json() for a in rows.attempts(hook_id, limit)]}  # fmt: skip
