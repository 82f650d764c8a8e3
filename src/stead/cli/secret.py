"""``stead secret``: set, list and remove vault secrets (values only from stdin)."""

from __future__ import annotations

import argparse
import contextlib
import sys

from rich.markup import escape

from ..destinations import PROVIDER_HOSTS, check_hosts, provider_hosts
from ..errors import SecretError, UsageError
from ..runtime.runtime import Runtime
from ..sandbox.secrets import check_name, new_key
from .common import EXIT_COMPLETED, emit_json, err, out, runtime_for, tenant_of, wants_json

MAX_SECRET_CHARS = 64 * 1024
"""The longest secret value ``stead secret set`` stores."""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    secret = sub.add_parser("secret", help="manage encrypted secrets for tools")
    ss = secret.add_subparsers(dest="secret_command", required=True, metavar="COMMAND")

    p = ss.add_parser(
        "set", parents=[common], help="store a secret; the value is read from standard input"
    )
    p.add_argument("name")
    _scope(p)
    bind = p.add_mutually_exclusive_group()
    bind.add_argument(
        "--to",
        metavar="HOST[,HOST]",
        help="the hosts stead may send it to as a model's key or an MCP server's header "
        "(exact, or *.domain); without --to or --provider, a model key goes only to its "
        "provider's own endpoint, and no MCP server gets it",
    )
    bind.add_argument(
        "--provider",
        choices=sorted(PROVIDER_HOSTS),
        help="send it only to this provider's own endpoint (api.openai.com, api.anthropic.com)",
    )
    p.set_defaults(func=cmd_set)

    p = ss.add_parser("ls", parents=[common], help="list secret names and scopes (no values)")
    p.set_defaults(func=cmd_ls)

    p = ss.add_parser("rm", parents=[common], help="remove a secret")
    p.add_argument("name")
    _scope(p)
    p.set_defaults(func=cmd_rm)

    p = ss.add_parser("keygen", parents=[common], help="print a new vault key")
    p.set_defaults(func=cmd_keygen)


def _scope(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--agent",
        default="",
        metavar="ID",
        help="scope the secret to one agent instead of its whole tenant",
    )


def _tenant_of(args: argparse.Namespace, store_tenant: str | None) -> str:
    # with --tenant, the store view already refuses another tenant's agent
    return store_tenant or tenant_of(args) or "default"


def cmd_set(args: argparse.Namespace) -> int:
    check_name(args.name)
    to = provider_hosts(args.provider) if args.provider else None
    if args.to is not None:
        to = check_hosts(args.to.split(","))
    if sys.stdin.isatty():
        err.print(f"value for {args.name} (end with Ctrl-D): ", end="")
    try:
        # a bounded read: never the whole stream
        value = sys.stdin.read(MAX_SECRET_CHARS + 2).removesuffix("\n")
    except UnicodeDecodeError:
        raise UsageError(f"the value of {args.name} is not UTF-8 text") from None
    if len(value) > MAX_SECRET_CHARS:
        raise UsageError(
            f"the value of {args.name} is longer than {MAX_SECRET_CHARS // 1024} Ki characters; "
            "a secret is a key or token, not a file: store a larger value elsewhere"
        )
    with runtime_for(args) as rt:
        owner = rt.store.get_record(args.agent).tenant if args.agent else None
        tenant = _tenant_of(args, owner)
        rt.vault().set(tenant, args.name, value, agent_id=args.agent, at=rt.clock.now(), to=to)
    scope = f"agent {args.agent}" if args.agent else f"tenant {tenant}"
    if wants_json(args):
        emit_json({"name": args.name, "tenant": tenant, "agent_id": args.agent or None,
                   "to": list(to) if to else None})  # fmt: skip
    else:
        bound = f", sent only to {', '.join(to)}" if to else ""
        out.print(f"stored secret {args.name} for {scope} (encrypted{bound})")
    return EXIT_COMPLETED


def cmd_ls(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        tenant = tenant_of(args) or "default"
        rows = rt.store.list_secrets(tenant)
        sent = _where_sent(rt, tenant, rows)
    if wants_json(args):
        emit_json([{"name": n, "agent_id": a or None, "updated_at": t,
                    **({"to": sent[(a, n)]} if (a, n) in sent else {})}
                   for a, n, t in rows])  # fmt: skip
    elif not rows:
        other = "" if tenant_of(args) else " (secrets are per tenant: --tenant T lists T's)"
        out.print(f"no secrets for tenant {tenant}{other}")
    else:
        for agent_id, name, _ in rows:
            to = sent.get((agent_id, name), ())
            where = "" if to == () else (
                f"; sent only to {', '.join(to)}" if to else "; bound to no host"
            )  # fmt: skip
            owner = "agent " + agent_id if agent_id else "tenant " + tenant
            out.print(f"{name}  ({owner}{escape(where)})")
    return EXIT_COMPLETED


def _where_sent(
    rt: Runtime, tenant: str, rows: list[tuple[str, str, float]]
) -> dict[tuple[str, str], list[str] | None]:
    """The hosts each secret may be sent to (None: bound to none), when this process has
    the vault key to open them; without it, or for one it cannot open, nothing is said."""
    try:
        vault = rt.vault()
    except SecretError:
        return {}
    sent: dict[tuple[str, str], list[str] | None] = {}
    for agent_id, name, _ in rows:
        with contextlib.suppress(SecretError):
            found = vault.find(tenant, agent_id, name)
            if found is not None:
                sent[(agent_id, name)] = list(found.to) if found.to is not None else None
    return sent


def cmd_rm(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        owner = rt.store.get_record(args.agent).tenant if args.agent else None
        tenant = _tenant_of(args, owner)
        removed = rt.store.delete_secret(tenant, args.agent, check_name(args.name))
    if not removed:
        raise SecretError(
            f"no secret {args.name} for "
            f"{'agent ' + args.agent if args.agent else 'tenant ' + tenant}"
        )
    if not wants_json(args):
        out.print(f"removed secret {args.name}")
    return EXIT_COMPLETED


def cmd_keygen(args: argparse.Namespace) -> int:
    sys.stdout.write(new_key() + "\n")
    return EXIT_COMPLETED
