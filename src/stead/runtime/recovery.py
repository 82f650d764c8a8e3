"""What an activation does first: put the workspace back, settle interrupted calls.

Run once, right after the lease is taken and before any step (and not at all
on a store put back behind this host's workspace: :mod:`stead.integrity.workhead`):

1. The workspace is compared with the last committed manifest and restored to
   it; a ``workspace_restored`` event names every path that was put back.
2. Each call whose intent was committed but whose result never was is settled
   by its effect class. ``idempotent`` calls are left to run again with the same
   idempotency key. ``effectful`` calls with a ``reconcile`` hook are asked
   whether they happened. Everything else is marked ``outcome_unknown`` and the
   agent stops in ``needs_attention``: it is never silently re-run and never
   silently assumed done.
"""

from __future__ import annotations

from ..integrity.workhead import check
from ..journal import Kind
from ..tools.base import jsonable
from .activation import Activation


def recover(act: Activation, activation_id: str) -> tuple[str, ...]:
    """Restore the workspace and settle pending intents; return the restored paths."""
    if (head := check(act)) is None:  # the store went back: running would repeat what it lost
        return ()
    act.on_commit = head.after(act.on_commit)  # each commit from now on, recorded beside it
    state = act.state
    delta = act.workspace.restore(state.manifest)
    act.manifest = dict(state.manifest)
    if delta:
        act.emit(
            Kind.WORKSPACE_RESTORED,
            paths=delta.paths(),
            reverted=sorted(delta.changed),
            recreated=delta.removed,
            reason="the workspace differed from the last committed manifest",
        )
    assert act.lease is not None
    act.emit(
        Kind.ACTIVATION_STARTED, worker=act.owner, epoch=act.lease.epoch, activation=activation_id
    )
    for call_id, call in sorted(state.pending.items(), key=lambda kv: kv[1]["action"]):
        if call["effect"] == "idempotent":
            continue  # runs again, with the same idempotency key, as the step resumes
        tool = act.tools.get(call["tool"])
        if tool is None or tool.reconcile is None:
            act.emit(
                Kind.OUTCOME_UNKNOWN,
                call_id=call_id,
                tool=call["tool"],
                reason=f"call {call_id} to effectful tool {call['tool']} was interrupted "
                "after its intent was recorded and before its result was, and "
                "the tool has no reconcile hook; decide with `stead resolve "
                f"{act.record.agent_id} {call_id} --as done|retry|abort`",
            )
            continue
        try:
            answer = tool.ask_reconcile(call["args"], act.ctx_for(call_id))
            verdict, result = answer.verdict, answer.result
        except Exception as exc:  # a failing hook cannot tell us anything
            verdict, result = "unknown", f"reconcile hook failed: {exc}"
        act.emit(Kind.RECONCILED, call_id=call_id, tool=call["tool"], verdict=verdict)
        if verdict == "done":
            output = jsonable(result) if result is not None else {"reconciled": "done"}
            recorded = act.as_recorded(call["tool"], {"ok": True, "output": output})
            act.emit(
                Kind.TOOL_RESULT,
                action=call["action"],
                call_id=call_id,
                tool=call["tool"],
                args=call["args"],
                reconciled=True,
                **recorded,
            )
        elif verdict == "unknown":
            act.emit(
                Kind.OUTCOME_UNKNOWN,
                call_id=call_id,
                tool=call["tool"],
                reason=f"the reconcile hook of {call['tool']} could not tell whether "
                f"call {call_id} happened; decide with `stead resolve "
                f"{act.record.agent_id} {call_id} --as done|retry|abort`",
            )
        # "not_done": the intent stays pending and the call runs again as the step resumes
    act.flush()
    return tuple(delta.paths())
