"""``stead webhook``: add, list and remove a tenant's webhooks, and see their deliveries."""

from __future__ import annotations

import argparse

from rich.markup import escape

from ..clock import iso
from ..notices import EVENT_TYPES
from ..notify import addresses, hooks
from .common import EXIT_COMPLETED, emit_json, err, out, runtime_for, tenant_of, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    hook = sub.add_parser("webhook", help="tell a URL when an agent waits, stops or finishes")
    hs = hook.add_subparsers(dest="webhook_command", required=True, metavar="COMMAND")

    p = hs.add_parser(
        "add", parents=[common], help="add a webhook; its signing secret is printed once"
    )
    p.add_argument("url", help="https://… (http:// only to networks the operator allows)")
    p.add_argument(
        "--events",
        default=",".join(EVENT_TYPES),
        metavar="EVENT[,EVENT]",
        help=f"what to be told of: {', '.join(EVENT_TYPES)} (default: all)",
    )
    p.set_defaults(func=cmd_add)

    p = hs.add_parser("ls", parents=[common], help="list webhooks with their last delivery")
    p.set_defaults(func=cmd_ls)

    p = hs.add_parser("rm", parents=[common], help="remove a webhook and what it has queued")
    p.add_argument("hook_id", metavar="ID")
    p.set_defaults(func=cmd_rm)

    p = hs.add_parser("deliveries", parents=[common], help="a webhook's recent deliveries")
    p.add_argument("hook_id", metavar="ID")
    p.set_defaults(func=cmd_deliveries)


def _tenant(args: argparse.Namespace) -> str:
    return tenant_of(args) or "default"


def cmd_add(args: argparse.Namespace) -> int:
    key = hooks.vault_key()
    with runtime_for(args) as rt:
        secret, record = hooks.add(
            hooks.rows_of(rt.store), _tenant(args), args.url, args.events.split(","), rt.clock,
            key, addresses.allowed_networks(),
        )  # fmt: skip
    if wants_json(args):
        emit_json({"hook_id": record.hook_id, "url": record.url, "events": list(record.events),
                   "secret": secret})  # fmt: skip
        return EXIT_COMPLETED
    out.print(f"added webhook {record.hook_id} for tenant {record.tenant}: {escape(record.url)}")
    out.print(f"events: {', '.join(record.events)}")
    out.print(f"signing secret (shown once, never again): {secret}", markup=False)
    if key is None:
        err.print(
            "warning: no vault key (STEAD_SECRET_KEY), so the secret is stored unencrypted; "
            "set one to keep it sealed"
        )
    return EXIT_COMPLETED


def _last(last: dict[str, object] | None) -> str:
    if last is None:
        return "nothing sent yet"
    code = f" {last['code']}" if last.get("code") is not None else ""
    error = f" ({last['error']})" if last.get("error") else ""
    return f"{last['state']}{code} after {last['attempts']} tries{error}"


def cmd_ls(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        listed = hooks.listing(hooks.rows_of(rt.store), _tenant(args))
    if wants_json(args):
        emit_json(listed)
    elif not listed:
        out.print(f"no webhooks for tenant {_tenant(args)}")
    for h in [] if wants_json(args) else listed:
        out.print(f"{h['hook_id']}  {h['url']}  [{', '.join(h['events'])}]  "
                  f"last: {_last(h['last'])}", markup=False)  # fmt: skip
    return EXIT_COMPLETED


def cmd_rm(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        hooks.remove(hooks.rows_of(rt.store), _tenant(args), args.hook_id)
    if not wants_json(args):
        out.print(f"removed webhook {args.hook_id}")
    return EXIT_COMPLETED


def cmd_deliveries(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        found = hooks.history(hooks.rows_of(rt.store), _tenant(args), args.hook_id)
    if wants_json(args):
        emit_json(found)
        return EXIT_COMPLETED
    out.print(f"{found['hook_id']}  {found['url']}", markup=False)
    if not found["deliveries"]:
        out.print("nothing sent yet")
    for d in found["deliveries"]:
        code = "" if d["last_code"] is None else f" {d['last_code']}"
        error = f" ({d['last_error']})" if d["last_error"] else ""
        out.print(f"{d['msg_id']}  {d['event']}  {iso(d['created_at'])}  {d['state']}{code}, "
                  f"{d['attempts']} tries{error}", markup=False)  # fmt: skip
    return EXIT_COMPLETED
