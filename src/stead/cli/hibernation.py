"""``stead hibernate|wake|snapshots|restore|fork|export|import``: agents at rest and on the move."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ..snapshots import trust
from ..state import State
from .common import (
    describe_stop,
    emit_json,
    err,
    exit_code_for,
    out,
    position,
    runtime_for,
    wants_json,
)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "hibernate", parents=[common], help="freeze a waiting agent into a snapshot; free its disk"
    )
    p.add_argument("agent_id")
    p.set_defaults(func=cmd_hibernate)

    p = sub.add_parser("wake", parents=[common], help="restore a hibernated agent now")
    p.add_argument("agent_id")
    p.add_argument("--no-resume", action="store_true", help="restore only; do not run it")
    p.set_defaults(func=cmd_wake)

    p = sub.add_parser(
        "snapshots", parents=[common], help="an agent's snapshots, and which are used"
    )
    p.add_argument("agent_id")
    p.set_defaults(func=cmd_snapshots)

    p = sub.add_parser(
        "restore", parents=[common], help="restore one snapshot (once ever), as a wake would"
    )
    p.add_argument("snapshot_id")
    p.add_argument("--no-resume", action="store_true", help="restore only; do not run it")
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser(
        "fork", parents=[common], help="a new agent (new id and key) from a version of this one"
    )
    p.add_argument("agent_id")
    p.add_argument("--at", type=position, metavar="VERSION", dest="at_version")
    p.add_argument("--name", help="the fork's name (default: the origin's)")
    p.add_argument(
        "--with-grants",
        action="store_true",
        help="delegate the origin's live grants to the fork (never wider; revoked with them)",
    )
    p.set_defaults(func=cmd_fork)

    p = sub.add_parser("export", parents=[common], help="write an agent's signed, portable archive")
    p.add_argument("agent_id")
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.add_argument(
        "--move", action="store_true", help="a transfer: the source is retired and cannot run"
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", parents=[common], help="read an archive in as a new agent")
    p.add_argument("file")
    p.add_argument(
        "--with-grants",
        action="store_true",
        help="re-grant the archive's live grants, recorded as yours",
    )
    p.add_argument(
        "--trust-key",
        action="append",
        default=[],
        metavar="KEY",
        help="accept only archives signed by this exporter key (repeat for more; "
        "`stead export` prints an archive's key)",
    )
    p.add_argument(
        "--trusted-keys",
        metavar="FILE",
        help=f"a file of trusted exporter keys, one a line (default: ${trust.ENV})",
    )
    p.set_defaults(func=cmd_import)


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def cmd_hibernate(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        snap = rt.hibernate(args.agent_id)
    if wants_json(args):
        emit_json(snap.to_json())
    else:
        out.print(snap.snapshot_id)
        err.print(
            f"agent {args.agent_id} hibernated: {snap.files} files, {snap.bytes:,} bytes "
            f"({snap.stored_bytes:,} stored); it wakes on a message, an answer, its timer, "
            f"or `stead wake {args.agent_id}`"
        )
    return 0


def _restored(args: argparse.Namespace, state: State, run: object) -> int:
    if not args.no_resume and state.status in ("running", "created") and callable(run):
        state = run()
    if wants_json(args):
        emit_json({"agent_id": state.agent_id, "status": state.status, "version": state.version})
    else:
        for line in describe_stop(state):
            out.print(line)
    return exit_code_for(state)


def cmd_wake(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        state = rt.wake(args.agent_id)
        return _restored(args, state, lambda: rt.run(state.agent_id).state)


def cmd_restore(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        state = rt.restore(args.snapshot_id)
        return _restored(args, state, lambda: rt.run(state.agent_id).state)


def cmd_snapshots(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        snaps = rt.store.list_snapshots(args.agent_id)
        state = rt.store.load_state(args.agent_id)
    # only the snapshot the agent sleeps in can still be restored
    current = (state.hibernated or {}).get("snapshot_id")
    if wants_json(args):
        emit_json([s.to_json() for s in snaps])
        return 0
    table = Table("snapshot", "version", "made", "files", "bytes", "stored", "restored", box=None)
    for s in snaps:
        if s.consumed:
            used = f"{_when(s.consumed_at)} by {s.consumed_by}"
        elif s.snapshot_id == current:
            used = "[green]not yet[/]"
        else:
            used = f"never (the agent is {state.status})"
        table.add_row(
            s.snapshot_id,
            str(s.version),
            _when(s.created_at),
            str(s.files),
            f"{s.bytes:,}",
            f"{s.stored_bytes:,}",
            used,
        )
    out.print(table)
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        state = rt.fork(
            args.agent_id, at_version=args.at_version, with_grants=args.with_grants, name=args.name
        )
    origin = state.origin or {}
    if wants_json(args):
        emit_json({"agent_id": state.agent_id, "status": state.status, "origin": origin})
    else:
        out.print(state.agent_id)
        err.print(
            f"forked from {origin.get('agent_id')} at version {origin.get('version')}; "
            f"{len(state.grants)} grants delegated, status {state.status}"
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        done = rt.export(args.agent_id, Path(args.output), move=args.move)
    if wants_json(args):
        emit_json(done)
    else:
        out.print(done["path"])
        moved = "; the source is retired (moved)" if done["move"] else ""
        err.print(f"archive {done['archive_id']}, sha256 {done['sha256']}{moved}")
        err.print(
            f"signed with agent {args.agent_id}'s key {done['public_key']}; an importer "
            f"trusts it with `stead import FILE --trust-key {done['public_key']}`"
        )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    # read before the store is opened: a bad key or list refuses with nothing touched
    trusted = trust.TrustedKeys.configured(args.trust_key, args.trusted_keys)
    with runtime_for(args) as rt:
        state = rt.import_archive(Path(args.file), with_grants=args.with_grants, trusted=trusted)
    origin = state.origin or {}
    key = origin.get("signed_by")
    if trusted is not None:
        said = f"signed by key {key}, a trusted key ({' and '.join(trusted.sources)})"
    else:
        said = (
            f"[yellow]warning[/]: {escape(args.file)} is signed by key {key}, which is on no trust "
            "list: its signature proves only that the archive matches that key, not who "
            "exported it. To import only archives from exporters you know, pass "
            f"--trust-key KEY or set ${trust.ENV} to a file of keys"
        )
    if wants_json(args):
        emit_json(
            {
                "agent_id": state.agent_id,
                "status": state.status,
                "origin": origin,
                "signed_by": key,
                "trusted": trusted is not None,
            }
        )
        if trusted is None:
            err.print(said)
    else:
        out.print(state.agent_id)
        err.print(
            f"imported agent {origin.get('agent_id')} (archive {origin.get('archive_id')}) as "
            f"{state.agent_id}, status {state.status}; {len(state.grants)} grants"
        )
        err.print(said)
    return 0
