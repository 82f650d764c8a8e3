"""Commands that create, run and message agents: run, resume, send, resolve."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.status import Status

from ..journal import Event, Kind
from ..livetext import CHANNEL, Piece
from ..runtime.activation import Outcome
from ..runtime.runtime import Runtime
from ..spec import load_spec
from ..state import State
from ..summaries import shown
from .common import (
    describe_stop,
    emit_json,
    err,
    exit_code_for,
    out,
    runtime_for,
    wants_json,
    whole,
)
from .progress import step_lines

MAX_STEPS = whole(1, 10**9)
"""A run's decisions: more than a run makes, fewer than a store cannot count."""


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("run", parents=[common], help="create an agent from a spec and run it")
    p.add_argument("spec", help="path of the agent spec (YAML)")
    p.add_argument("--id", dest="agent_id", help="agent id to use (default: a new one)")
    p.add_argument("--max-steps", type=MAX_STEPS, help="stop this run after N decisions")
    p.add_argument("--record", type=Path, help="append the model's exchanges to this file")
    _quiet(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "resume",
        parents=[common],
        help="recover an agent and run it on from its last committed step",
    )
    p.add_argument("agent_id")
    p.add_argument("--max-steps", type=MAX_STEPS, help="stop this run after N decisions")
    p.add_argument("--record", type=Path, help="append the model's exchanges to this file")
    _quiet(p)
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("send", parents=[common], help="deliver a message to an agent")
    p.add_argument("agent_id")
    p.add_argument("text")
    p.add_argument(
        "--no-resume", action="store_true", help="only deliver the message; do not run the agent"
    )
    _quiet(p)
    p.set_defaults(func=cmd_send)

    p = sub.add_parser("resolve", parents=[common], help="decide a call whose outcome is unknown")
    p.add_argument("agent_id")
    p.add_argument("call_id")
    p.add_argument(
        "--as",
        dest="resolution",
        required=True,
        choices=["done", "retry", "abort"],
        help="done: it happened; retry: run it again; abort: give it up",
    )
    p.add_argument(
        "--no-resume", action="store_true", help="only record the decision; do not run the agent"
    )
    _quiet(p)
    p.set_defaults(func=cmd_resolve)


def _quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="do not print each step as it happens (on stderr); only the outcome",
    )


def _run(rt: Runtime, agent_id: str, args: argparse.Namespace) -> int:
    as_json = wants_json(args)
    max_steps = getattr(args, "max_steps", None)
    record = getattr(args, "record", None)
    if as_json:
        outcome = rt.run(agent_id, max_steps=max_steps, record_model=record)
    else:
        quiet = bool(getattr(args, "quiet", False))
        said = [""]  # the words of the answer the next decision is made of
        with Status(f"running {agent_id}", console=err) as status:

            def heard(piece: Piece) -> None:
                if piece.done:
                    said[0] = piece.text
                tail = " ".join(piece.text.split())[-70:]
                status.update(f"running {agent_id}: {shown(tail)}")

            def progress(events: Sequence[Event]) -> None:
                for ev in events:
                    if ev.kind == Kind.DECISION:
                        status.update(f"running {agent_id}: step {ev.data['step']}")
                    if not quiet:
                        for line in step_lines(ev, said[0]):
                            err.print(line)
                    if ev.kind in (Kind.DECISION, Kind.ANSWER_REFUSED):
                        said[0] = ""

            unwatch = CHANNEL.watch(agent_id, heard) if not quiet else None
            try:
                outcome = rt.run(
                    agent_id, max_steps=max_steps, on_commit=progress, record_model=record
                )
            finally:
                if unwatch is not None:
                    unwatch()
    return _report(outcome, as_json)


def _report(outcome: Outcome, as_json: bool) -> int:
    state = outcome.state
    if as_json:
        emit_json(
            {
                "agent_id": state.agent_id,
                "status": state.status,
                "reason": state.status_reason,
                "version": state.version,
                "steps_this_run": outcome.steps,
                "restored_paths": list(outcome.restored),
                "unknown_calls": sorted(state.unknown),
            }
        )
    else:
        if outcome.restored:
            out.print(
                f"restored the workspace to its last committed manifest: "
                f"{', '.join(outcome.restored)}"
            )
        out.print(f"ran {outcome.steps} step(s)")
        for line in describe_stop(state):
            out.print(line)
    return exit_code_for(state)


def cmd_run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    Runtime.check_loads(spec)  # a spec that cannot run stores nothing
    with runtime_for(args) as rt:
        state = rt.create(spec, args.agent_id)
        if not wants_json(args):
            out.print(f"created agent [bold]{state.agent_id}[/] ({spec.name})")
        return _run(rt, state.agent_id, args)


def cmd_resume(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        return _run(rt, args.agent_id, args)


def _after_input(rt: Runtime, state: State, args: argparse.Namespace) -> int:
    if args.no_resume or state.status != "running":
        if wants_json(args):
            emit_json(
                {"agent_id": state.agent_id, "status": state.status, "version": state.version}
            )
        else:
            for line in describe_stop(state):
                out.print(line)
        return exit_code_for(state)
    return _run(rt, state.agent_id, args)


def cmd_send(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        state = rt.send(args.agent_id, args.text)
        if not wants_json(args):
            err.print(f"delivered to {args.agent_id}")
        return _after_input(rt, state, args)


def cmd_resolve(args: argparse.Namespace) -> int:
    with runtime_for(args) as rt:
        state = rt.resolve(args.agent_id, args.call_id, args.resolution)
        if not wants_json(args):
            err.print(f"recorded: call {args.call_id} resolved as {args.resolution}")
        return _after_input(rt, state, args)
