"""``stead certificate|verify-certificate|signoff``: completions that can be checked."""

from __future__ import annotations

import argparse
import json

from ..canonical import loads
from ..errors import UsageError
from ..integrity.certificates import journaled_certificate, verify_certificate
from ..integrity.clearing import cleared
from ..journal import Kind, NewEvent
from ..state import State
from .common import (
    EXIT_COMPLETED,
    EXIT_FAILED,
    describe_stop,
    emit_json,
    err,
    out,
    position,
    runtime_for,
    wants_json,
)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser(
        "certificate", parents=[common], help="print an agent's completion certificate"
    )
    p.add_argument("agent_id")
    p.set_defaults(func=cmd_certificate)

    p = sub.add_parser(
        "verify-certificate", parents=[common], help="check a certificate against the store"
    )
    p.add_argument("file")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "check", parents=[common], help="run the monitors over a stored journal, after the fact"
    )
    p.add_argument("agent_id")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("clear", parents=[common], help="clear a violation that suspended an agent")
    p.add_argument("agent_id")
    p.add_argument("violation_id")
    p.add_argument("--reason", required=True)
    p.set_defaults(func=cmd_clear)

    for name, what in (
        ("lineage", "where an event came from: its decision and the results that fed it"),
        ("impact", "everything downstream of a result: the blast radius"),
    ):
        p = sub.add_parser(name, parents=[common], help=what)
        p.add_argument("agent_id")
        p.add_argument("seq", type=position, metavar="EVENT")
        p.set_defaults(func=cmd_provenance, which=name)

    p = sub.add_parser(
        "quarantine", parents=[common], help="mark a result bad; flag what depends on it"
    )
    p.add_argument("agent_id")
    p.add_argument("seq", type=position, metavar="EVENT")
    p.add_argument("--reason", required=True)
    p.set_defaults(func=cmd_quarantine)

    p = sub.add_parser(
        "rollback", parents=[common], help="undo what came after a version, or a bad result"
    )
    p.add_argument("agent_id")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--to", type=position, metavar="VERSION", dest="to_version")
    which.add_argument("--downstream-of", type=position, metavar="EVENT", dest="downstream_of")
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser("signoff", parents=[common], help="sign off a goal that asks for a person")
    p.add_argument("agent_id")
    p.add_argument("goal_id")
    p.set_defaults(func=cmd_signoff)


def cmd_certificate(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        certificate = journaled_certificate(rt.store, args.agent_id)
    emit_json(certificate)
    return EXIT_COMPLETED


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        with open(args.file, encoding="utf-8") as fh:
            certificate = loads(fh.read())
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from exc
    except ValueError as exc:
        raise UsageError(f"{args.file} is not JSON: {exc}") from exc
    with runtime_for(args, reads_only=True) as rt:
        problems = verify_certificate(rt.store, certificate)
    if wants_json(args):
        emit_json({"ok": not problems, "problems": problems})
    elif problems:
        err.print("[red]certificate does not verify[/]:")
        for p in problems:
            err.print(f"  - {p}", markup=False)
    else:
        agent = certificate.get("agent_id")
        out.print(
            f"certificate verifies: agent {agent} completed at journal version "
            f"{certificate.get('version')} ({len(certificate.get('goals', []))} goal(s))"
        )
    return EXIT_COMPLETED if not problems else EXIT_FAILED


def cmd_check(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        found, journaled = rt.check(args.agent_id)
    same = [v.to_json() for _, v in found] == journaled
    if wants_json(args):
        emit_json(
            {
                "violations": [{"seq": seq, **v.to_json()} for seq, v in found],
                "journaled": journaled,
                "same_as_live": same,
            }
        )
    else:
        for seq, v in found:
            out.print(f"event {seq}: {v.rule} ({v.verdict}): {v.message}", markup=False)
        out.print(f"{len(found)} violation(s); the live run recorded {len(journaled)}")
        if not same:
            err.print(
                "[red]the monitors find something else than the live run recorded[/] "
                "(the spec's monitors changed, or the journal is not what was run)"
            )
    return EXIT_COMPLETED if same else EXIT_FAILED


def cmd_clear(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:

        def build(state: State) -> list[NewEvent]:
            return cleared(state, args.violation_id, rt.person(), args.reason)

        state = rt.append_as_person(args.agent_id, build)
    if not wants_json(args):
        if state.status == "running":
            out.print(f"cleared {args.violation_id}; continue with: stead resume {args.agent_id}")
        else:
            out.print(f"cleared {args.violation_id}")
            for line in describe_stop(state):
                out.print(line)
    return EXIT_COMPLETED


def cmd_provenance(args: argparse.Namespace) -> int:
    with runtime_for(args, reads_only=True) as rt:
        graph = rt.provenance(args.agent_id)
        try:
            nodes = graph.lineage(args.seq) if args.which == "lineage" else graph.impact(args.seq)
        except KeyError:
            raise UsageError(f"agent {args.agent_id} has no event {args.seq}") from None
    if wants_json(args):
        emit_json([n.to_json() for n in nodes])
        return EXIT_COMPLETED
    if not nodes:
        out.print(f"event {args.seq}: nothing " + ("recorded upstream" if args.which == "lineage"
                                                    else "downstream"))  # fmt: skip
    for n in nodes:
        call = f" {n.call_id} {n.tool}" if n.call_id else ""
        out.print(f"{n.seq:>6}  {n.kind}{call}  ({n.why})", markup=False)
    return EXIT_COMPLETED


def cmd_quarantine(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        status, downstream = rt.quarantine(args.agent_id, args.seq, args.reason)
    if wants_json(args):
        emit_json({"seq": args.seq, "downstream": downstream, "status": status})
    else:
        now = (
            "the worker running it stops it before its next step"
            if status == "stopping"
            else f"agent is {status}"
        )
        out.print(
            f"quarantined event {args.seq}; flagged downstream: "
            f"{', '.join(map(str, downstream)) or 'nothing'}; {now}"
        )
    return EXIT_COMPLETED


def cmd_rollback(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        report = rt.rollback(
            args.agent_id, to_version=args.to_version, downstream_of=args.downstream_of
        )
    if wants_json(args):
        emit_json(
            {
                "compensated": report.compensated,
                "failed": report.failed,
                "needs_person": report.needs_person,
                "restored_paths": report.restored_paths,
            }
        )
        return EXIT_COMPLETED
    out.print(f"compensated: {', '.join(report.compensated) or 'nothing'}", markup=False)
    if report.failed or report.needs_person:
        err.print(
            "[yellow]for a person to undo[/]: "
            + ", ".join(report.failed + report.needs_person)
            + f" (see `stead trace {args.agent_id}`)"
        )
    out.print(f"workspace put back: {', '.join(report.restored_paths) or 'no change'}")
    out.print(f"continue with: stead resume {args.agent_id}")
    return EXIT_COMPLETED


def cmd_signoff(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:

        def build(state: State) -> list[NewEvent]:
            if not any(g["id"] == args.goal_id for g in state.goals):
                goals = ", ".join(g["id"] for g in state.goals) or "none"
                raise UsageError(
                    f"agent {args.agent_id} has no goal {args.goal_id}; goals: {goals}"
                )
            return [NewEvent(Kind.GOAL_SIGNED_OFF, {"id": args.goal_id, "by": rt.person()})]

        rt.append_as_person(args.agent_id, build)
    if not wants_json(args):
        out.print(f"signed off goal {args.goal_id} of {args.agent_id}")
    else:
        print(json.dumps({"agent_id": args.agent_id, "goal": args.goal_id}))
    return EXIT_COMPLETED
