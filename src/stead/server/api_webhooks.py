"""The webhook endpoints: a tenant's admin adds and removes webhooks; a viewer lists
them and their deliveries. The signing secret is in the answer that adds one, and
in no answer after it."""

from __future__ import annotations

from typing import Any

from ..notices import EVENT_TYPES
from ..notify import addresses, hooks
from .app import Call, Endpoint
from .schemas import ID, OBJECT, TEXT, answer, listing, strict

HOOK = answer({"hook_id": ID, "url": TEXT, "events": {"type": "array", "items": TEXT},
               "created_at": {"type": "number"}, "last": {"type": ["object", "null"]}})  # fmt: skip
NEW_HOOK = answer({"hook_id": ID, "url": TEXT, "events": {"type": "array", "items": TEXT},
                   "secret": TEXT})  # fmt: skip
HISTORY = answer({"hook_id": ID, "deliveries": {"type": "array", "items": OBJECT},
                  "attempts": {"type": "array", "items": OBJECT}},
                 required=["hook_id"])  # fmt: skip


def list_hooks(call: Call) -> Any:
    return hooks.listing(hooks.rows_of(call.server.store), call.token.tenant)


def add_hook(call: Call) -> Any:
    secret, record = hooks.add(
        hooks.rows_of(call.server.store), call.token.tenant, call.body["url"],
        call.body.get("events"), call.rt.clock, call.server.secret_key or hooks.vault_key(),
        addresses.allowed_networks(),
    )  # fmt: skip
    return {"hook_id": record.hook_id, "url": record.url, "events": list(record.events),
            "secret": secret}  # fmt: skip


def remove_hook(call: Call) -> None:
    hooks.remove(hooks.rows_of(call.server.store), call.token.tenant, call.params["hook_id"])


def deliveries(call: Call) -> Any:
    return hooks.history(hooks.rows_of(call.server.store), call.token.tenant,
                         call.params["hook_id"])  # fmt: skip


ENDPOINTS = [
    Endpoint("GET", "/v1/webhooks", "read", "List the tenant's webhooks and their last delivery",
             list_hooks, listing(HOOK), tag="webhooks"),
    Endpoint("POST", "/v1/webhooks", "govern", "Add a webhook (its secret is shown once)",
             add_hook, NEW_HOOK, body=strict(
                 {"url": {"type": "string", "minLength": 1, "maxLength": addresses.MAX_URL},
                  "events": {"type": "array", "minItems": 1, "maxItems": len(EVENT_TYPES),
                             "items": {"enum": list(EVENT_TYPES)}}}, required=["url"]),
             status=201, tag="webhooks"),
    Endpoint("DELETE", "/v1/webhooks/{hook_id}", "govern", "Remove a webhook",
             remove_hook, {}, status=204, tag="webhooks"),
    Endpoint("GET", "/v1/webhooks/{hook_id}/deliveries", "read",
             "A webhook's recent deliveries and attempts", deliveries, HISTORY, tag="webhooks"),
]  # fmt: skip
