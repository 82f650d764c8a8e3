"""One eval worker: a process that runs one agent, as ``stead resume`` does.

``python -m stead.evals.worker --store URL --data-dir DIR --agent ID`` takes the
agent's lease and runs it through :meth:`~stead.runtime.runtime.Runtime.run`,
the path every production worker takes. Three options let the eval put a
boundary at an exact point without changing how the agent runs:

``--max-steps K``
    stop after K decisions of this activation (a boundary between steps);
``--hold-after-intent K``
    once the intent of a call made by decision K is journaled, before the tool
    runs, say ``{"held": ...}`` and wait for a line on the ``--go-fd`` pipe: the eval then
    SIGKILLs this process, or breaks its database connections and lets it go on,
    so the boundary falls mid-step every time, however fast the tool is;
``--budget-usd X`` / ``--budget-tokens N``
    end after the step in which the agent's spend or tokens reach the cap.

It says what it does as JSON lines on the pipe given by ``--say-fd`` (stdout
without one), never mixed with what the agent's tools print: a held worker, and
one line when the run ends, with the agent's status and decisions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..journal import Event, Kind
from ..runtime.runtime import Runtime

_TO_EVAL: list[Any] = []


def _say(obj: dict[str, Any]) -> None:
    # on a pipe of its own: what a tool prints on stdout can never speak for the worker
    out = _TO_EVAL[0] if _TO_EVAL else sys.stdout
    out.write(json.dumps(obj, sort_keys=True) + "\n")
    out.flush()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m stead.evals.worker")
    p.add_argument("--store", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--hold-after-intent", type=int)
    p.add_argument("--budget-usd", type=float)
    p.add_argument("--budget-tokens", type=float)
    p.add_argument("--say-fd", type=int, help="the pipe the eval reads this worker's lines on")
    p.add_argument("--go-fd", type=int, help="the pipe a held worker is let go on")
    args = p.parse_args(argv)
    if args.say_fd is not None:
        os.set_inheritable(args.say_fd, False)  # no command or server a tool starts gets it
        _TO_EVAL.append(os.fdopen(args.say_fd, "w", encoding="utf-8"))
    go = sys.stdin
    if args.go_fd is not None:
        os.set_inheritable(args.go_fd, False)
        go = os.fdopen(args.go_fd, "r", encoding="utf-8")
    rt = Runtime(args.store, args.data_dir)
    try:
        start = rt.store.load_state(args.agent)
        decisions = start.decisions
        usage = dict(start.usage)
        held = False

        def seen(events: Sequence[Event]) -> None:
            nonlocal decisions, held
            for ev in events:
                if ev.kind == Kind.DECISION:
                    decisions += 1
                if "usage" in ev.data and isinstance(ev.data["usage"], dict):
                    usage["tokens"] = ev.data["usage"].get("total_tokens", 0)
                    usage["spend"] = ev.data["usage"].get("total_spend", 0)
            at = args.hold_after_intent
            intents = [ev for ev in events if ev.kind == Kind.TOOL_INTENT]
            if at is not None and not held and intents and decisions >= at:
                held = True
                first = intents[0]
                _say(
                    {
                        "held": {
                            "decision": decisions,
                            "seq": first.seq,
                            "call_id": first.data.get("call_id"),
                            "tool": first.data.get("tool"),
                        }
                    }
                )
                go.readline()  # the eval kills this process here, or lets it go on

        def over_budget() -> bool:
            if args.budget_usd is not None and usage.get("spend", 0) >= args.budget_usd:
                return True
            return args.budget_tokens is not None and usage.get("tokens", 0) >= args.budget_tokens

        outcome = rt.run(args.agent, max_steps=args.max_steps, on_commit=seen, stop=over_budget)
        state = outcome.state
        _say(
            {
                "status": state.status,
                "reason": state.status_reason,
                "decisions": state.decisions,
                "over_budget": over_budget(),
            }
        )
    finally:
        rt.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
