"""``stead serve`` (the HTTP API) and ``stead token`` (who may call it)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from ..clock import SystemClock, iso
from ..errors import UsageError
from ..extras import need
from ..runtime.runtime import Runtime
from ..store import open_store
from ..store.tokens import ROLES, TokenRows
from .common import (
    EXIT_COMPLETED,
    blobs_of,
    data_dir_of,
    emit_json,
    err,
    out,
    positive_seconds,
    runtime_for,
    store_url,
    tenant_of,
    wants_json,
    whole,
)

if TYPE_CHECKING:
    from ..server import Server
    from ..server.running import ServerWorkers

HIBERNATE_AFTER = 300.0
"""Seconds an agent waits before the server's worker hibernates it, as `stead work`'s."""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "serve", parents=[common], help="serve the HTTP API and the page, and run the agents"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=whole(1, 65535), default=8750, help="port to listen on (8750)")
    p.add_argument(
        "--specs",
        type=Path,
        default=None,
        metavar="DIR",
        help="the folder of specs agents may be made from by name over HTTP",
    )
    p.add_argument(
        "--forwarded-allow-ips",
        default=None,
        metavar="ADDRESSES",
        help="the proxies (comma-separated addresses or networks, such as 127.0.0.1) whose "
        "X-Forwarded-For and X-Forwarded-Proto are believed; by default none, and every "
        "client is the address it connects from",
    )
    p.add_argument(
        "--workers",
        type=whole(0, 64),
        default=1,
        metavar="N",
        help="how many workers the server runs for its store's agents (default 1, in "
        "its own process; each further one a `stead work --forever` it supervises); "
        "0 for a server beside separate `stead work` processes",
    )
    p.add_argument(
        "--in-flight",
        type=whole(1, 1_000_000),
        default=1000,
        metavar="N",
        help="agents each worker keeps in flight at once, parked while their models "
        "answer (default 1000)",
    )
    p.add_argument(
        "--poll",
        type=positive_seconds,
        default=1.0,
        metavar="SECONDS",
        help="how often the workers look for work made outside this server (default 1); "
        "work made through the server is run at once",
    )
    p.set_defaults(func=cmd_serve)

    token = sub.add_parser("token", help="API tokens: who may call `stead serve`")
    ts = token.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    p = ts.add_parser("create", parents=[common], help="make a token for --tenant T (shown once)")
    p.add_argument("--role", required=True, choices=ROLES, help="what it may do")
    p.add_argument("--name", default=None, help="who holds it (recorded with their approvals)")
    p.set_defaults(func=cmd_token_create)
    p = ts.add_parser("ls", parents=[common], help="list tokens (never their secrets)")
    p.set_defaults(func=cmd_token_ls)
    p = ts.add_parser("revoke", parents=[common], help="revoke a token at once")
    p.add_argument("token_id")
    p.set_defaults(func=cmd_token_revoke)
    p = ts.add_parser("log", parents=[common], help="the operator's log: failed logins")
    p.set_defaults(func=cmd_token_log)


def _rows(store: object) -> TokenRows:
    inner = getattr(store, "inner", store)
    if not isinstance(inner, TokenRows):
        raise UsageError("this store keeps no API tokens")
    return inner


def _operator(args: argparse.Namespace) -> None:
    if getattr(args, "tenant", None) is not None or os.environ.get("STEAD_TENANT") is not None:
        raise UsageError(
            "tokens are the operator's: run `stead token` without --tenant or $STEAD_TENANT"
        )


def cmd_token_create(args: argparse.Namespace) -> int:
    from ..server.auth import mint

    tenant = tenant_of(args)
    if tenant is None:
        raise UsageError("name the token's tenant: stead token create --tenant T --role R")
    with runtime_for(args) as rt:
        name = args.name or f"{args.role} of {tenant}"
        plain, record = mint(_rows(rt.store), tenant, args.role, name, rt.clock)
    if wants_json(args):
        emit_json({"token": plain, "token_id": record.token_id, "tenant": record.tenant,
                   "role": record.role, "name": record.name})  # fmt: skip
    else:
        out.print(plain, markup=False)
        err.print(
            f"token {record.token_id} for tenant {record.tenant}, role {record.role}: shown "
            "once, kept nowhere; send it as `Authorization: Bearer TOKEN`",
            markup=False,
        )
    return EXIT_COMPLETED


def cmd_token_ls(args: argparse.Namespace) -> int:
    _operator(args)
    with runtime_for(args, reads_only=True) as rt:
        tokens = _rows(rt.store).list_tokens()
    if wants_json(args):
        emit_json([{"token_id": t.token_id, "tenant": t.tenant, "role": t.role, "name": t.name,
                    "created_at": t.created_at, "revoked_at": t.revoked_at}
                   for t in tokens])  # fmt: skip
        return EXIT_COMPLETED
    table = Table("token", "tenant", "role", "name", "made", "revoked", box=None)
    for t in tokens:
        table.add_row(t.token_id, t.tenant, t.role, t.name, iso(t.created_at),
                      iso(t.revoked_at) if t.revoked_at else "")  # fmt: skip
    out.print(table)
    return EXIT_COMPLETED


def cmd_token_revoke(args: argparse.Namespace) -> int:
    _operator(args)
    with runtime_for(args) as rt:
        if not _rows(rt.store).revoke_token(args.token_id, rt.clock.now()):
            raise UsageError(f"there is no live token {args.token_id}; `stead token ls` lists them")
    err.print(f"revoked {args.token_id}")
    return EXIT_COMPLETED


def cmd_token_log(args: argparse.Namespace) -> int:
    _operator(args)
    with runtime_for(args, reads_only=True) as rt:
        lines = _rows(rt.store).operator_log(limit=1000)
    if wants_json(args):
        emit_json([{"seq": e.seq, "at": e.at, "kind": e.kind, **e.data} for e in lines])
        return EXIT_COMPLETED
    for e in lines:
        out.print(f"{iso(e.at)} {e.kind} {e.data}", markup=False)
    return EXIT_COMPLETED


def _proxies(text: str | None) -> list[str]:
    """The addresses or networks of ``--forwarded-allow-ips``. A forwarded address is
    believed only from a proxy the operator names: otherwise any client could say it
    is anyone, to be counted (and held off) as someone else."""
    proxies = [p.strip() for p in (text or "").split(",") if p.strip()]
    for proxy in proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise UsageError(
                f"--forwarded-allow-ips: {proxy!r} is not an address or network (such as "
                "127.0.0.1 or 10.0.0.0/8)"
            ) from None
    return proxies


def cmd_serve(args: argparse.Namespace) -> int:
    need("uvicorn", "server", "stead serve")
    need("aiohttp", "server", "stead serve")
    import uvicorn

    from ..server import Server, application

    _operator(args)
    proxies = _proxies(args.forwarded_allow_ips)
    url = store_url(args)
    data_dir = data_dir_of(args, url, ".stead")
    if args.specs is not None and not args.specs.is_dir():
        raise UsageError(f"--specs {args.specs} is not a folder")
    blobs = blobs_of(args)
    server = Server(open_store(url), data_dir, blobs=blobs, specs=args.specs, clock=SystemClock())
    server.workers = _workers(args, server, url, data_dir, blobs)
    err.print(f"serving {url} at http://{args.host}:{args.port}/v1/ (Ctrl-C stops)")
    if server.workers.count:
        err.print(
            f"running the store's agents with {server.workers.count} "
            f"worker{'s' if server.workers.count > 1 else ''} (--workers 0: none)"
        )
    else:
        err.print(
            "[yellow]running no agents[/] (--workers 0): approvals, messages and new "
            "agents wait for a `stead work --forever` on this store"
        )
    server.workers.start()
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again for the
    # handler it found: a quiet one, so that a requested stop exits 0
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        uvicorn.run(
            application(server),
            host=args.host,
            port=args.port,
            log_level="warning",
            proxy_headers=bool(proxies),
            forwarded_allow_ips=proxies or None,
        )
    finally:
        server.workers.stop()  # at once if the lifespan's end did (or never began)
        signal.signal(signal.SIGTERM, previous)
    return EXIT_COMPLETED


def _workers(
    args: argparse.Namespace, server: Server, url: str, data_dir: str, blobs: str | None
) -> ServerWorkers:
    """The server's own workers: one in its process (whose agents the page and the
    API can watch live), the rest supervised ``stead work`` children."""
    from ..notify import Deliverer, hooks
    from ..server.running import ServerWorkers
    from ..workers.parked import ParkedWorker

    if args.workers == 0:
        return ServerWorkers(None)
    rt = Runtime(
        server.store, data_dir, clock=server.clock, blobs=blobs, secret_key=server.secret_key
    )
    worker = ParkedWorker(rt, args.in_flight, threads=16, hibernate_after=HIBERNATE_AFTER)
    command = ["work", "--forever", "--in-flight", str(args.in_flight), "--store", url,
               "--data-dir", data_dir, "--poll", str(args.poll)]  # fmt: skip
    if blobs is not None:
        command += ["--blobs", blobs]
    deliverer = Deliverer(hooks.rows_of(server.store), server.clock)
    return ServerWorkers(worker, args.workers - 1, command, poll=args.poll,
                         deliver=deliverer.deliver_due, close=deliverer.close)  # fmt: skip
