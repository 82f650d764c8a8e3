"""One tool call of a decision, from the gate to the journal: :func:`run_tool`.

In order: an unknown tool is answered as an error; the call's provenance (the
decision it came from, the results that fed its arguments) is taken; the gate
judges it now, at the moment of action (grants, policy, approvals, autonomy),
unless a person already gave the authority or it is the rerun of an interrupted
call; the monitors may block or suspend it; a call that is not ``read_only``
journals its intent and flushes before it runs; the tool is given its secrets
(opened for this one call) and a context whose commands share the activation's
sandbox; its result is redacted, the workspace settled against the operator's
quota, and the result journaled (and flushed at once after an ``effectful``
call, to shrink the window in which a crash leaves its outcome unknown).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import InvalidAnswer, SecretError
from ..governance.gate import granted_approval
from ..governance.grants import network_grant
from ..integrity.hiding import with_values
from ..integrity.monitors import Call, Violation
from ..journal import Kind
from ..tools.base import Effect, Tool, describe_failure, jsonable
from .limits import settle_workspace

if TYPE_CHECKING:
    from .activation import Activation


def run_tool(
    act: Activation, index: int, action: dict[str, Any], authority: dict[str, Any] | None = None
) -> None:
    """Run one call of the in-flight decision, if the gate allows it now.

    ``authority`` is a verdict already given by a person (an accepted
    proposal); the call then runs under it instead of asking the gate.
    """
    t = act.tools.get(action["tool"])
    effect = t.effect.value if t is not None else None
    with act.trace.tool_call(action["tool"], action["call_id"], effect):
        _run_tool(act, index, action, authority)


def _run_tool(
    act: Activation, index: int, action: dict[str, Any], authority: dict[str, Any] | None
) -> None:
    call_id, name, args = action["call_id"], action["tool"], action.get("args", {})
    # an intent already committed means an earlier activation died during this call
    rerun = call_id in act.state.pending
    t = act.tools.get(name)
    result_of = {"action": index, "call_id": call_id, "tool": name, "args": args}
    try:  # handles the model passed stand for the hidden values they name
        args, handles = with_values(act, args)
    except InvalidAnswer as exc:
        act.emit(Kind.TOOL_RESULT, **result_of, ok=False, error=str(exc))
        return
    if handles:  # the person, the gate and the monitors see the values themselves
        result_of |= {"args": args, "handles": handles}
    if t is None:
        act.emit(
            Kind.TOOL_RESULT,
            **result_of,
            ok=False,
            error=f"unknown tool {name!r}; available tools: "
            f"{', '.join(sorted(act.tools)) or 'none'}",
        )
        return
    # provenance: the decision the call came from, the results that fed it
    inflight = act.state.inflight or {}
    taint = act.watch.taint_of(name, args) if act.watch is not None else {}
    origin: dict[str, Any] = {
        "provenance": {
            "decision": inflight.get("seq") if index >= 0 else None,
            "flows_from": act.flows.flows_from(args, act.state.recent_calls),
        }
    }
    if taint.get("args"):  # each argument's source, where data flow is watched
        origin["provenance"] |= {"args": taint["args"], "influenced": taint["influenced"]}
    if taint.get("allowed_by"):  # the flow the user's task asked for, which it uses once
        origin["provenance"]["allowed_by"] = taint["allowed_by"]
    # authority is checked now, at the moment of action, not when decided; a
    # rerun of an interrupted call was authorised when its intent was recorded
    shown: dict[str, Any] = {}
    if authority is not None:
        shown = {"verdict": authority}
    elif not rerun:
        verdict = act.governor.judge(t, call_id, args, taint)
        if verdict.decision == "ask" and act.watch is not None and act.watch.monitors.rules:
            # what no approval lifts is checked before a person is asked: nobody is
            # asked about a call the monitors would stop anyway, and the person sees
            # what they found (a data flow that their approval would let through)
            at, found = act.watch.check(call_id, name, args, True)
            stopping = [v for v in found if v.verdict in ("block", "suspend")]
            if stopping:
                before = {**verdict.to_json(), "monitored": at, "as_if_approved": True}
                _blocked(act, result_of, before, stopping)
                return
            lifted = act.watch.monitors.check_call(Call(call_id, name, args, at, False))
            seen = {(v.rule, v.message) for v in found}
            shown_all = [*found, *(v for v in lifted if (v.rule, v.message) not in seen)]
            findings = [f"{v.rule} ({v.verdict}): {v.message}" for v in shown_all]
            act.governor.hold(index, result_of | origin, verdict, findings)
            return
        if verdict.decision != "allow":
            act.governor.hold(index, result_of | origin, verdict)
            return
        shown = {"verdict": verdict.to_json()}
        net = network_grant(act.state.grants, act.clock.now())
        if net is not None:
            shown["verdict"]["network"] = net  # its commands may reach the network
        if act.watch is not None and act.watch.monitors.rules:
            at, found = act.watch.check(call_id, name, args, verdict.approval is not None)
            shown["verdict"]["monitored"] = at  # `stead check` asks again from here
            stopping = [v for v in found if v.verdict in ("block", "suspend")]
            if stopping:
                _blocked(act, result_of, shown["verdict"], stopping)
                return
            asking = [v for v in found if v.verdict == "ask"]
            if asking and verdict.approval is None:
                # a monitor asks a person (a data flow a person may allow): the call
                # runs once an approval for exactly it is granted, and uses it up
                aid = granted_approval(act.state, call_id, name, args, verdict.policy_version, at)
                if aid is None:
                    reason = "; ".join(f"monitor {v.rule}: {v.message}" for v in asking)
                    ask = replace(verdict, decision="ask", reason=reason)
                    findings = [f"{v.rule} ({v.verdict}): {v.message}" for v in found]
                    act.governor.hold(index, result_of | origin, ask, findings)
                    return
                shown["verdict"]["approval"] = aid
    if t.effect is not Effect.READ_ONLY and not rerun:
        act.emit(
            Kind.TOOL_INTENT,
            **result_of,
            effect=t.effect.value,
            idempotency_key=act.idempotency_key(call_id),
            **shown,
            **origin,
        )
        act.flush()
        act.still_held()  # a commit that waited past the lease must not act after it
        shown, origin = {}, {}
    act.dirty = True
    act.redactor()  # the vault opened before the tool runs: it cannot fail after
    secrets: dict[str, str] = {}
    unset = ""  # why the tool's secrets could not be given: the operator's to fix
    try:
        try:
            secrets = secrets_for(act, t)
        except SecretError as exc:
            unset = str(exc)
            raise
        output = t.call(args, act.ctx_for(call_id, secrets, t))
        result: dict[str, Any] = {"ok": True, "output": jsonable(output)}
    except Exception as exc:  # a tool's failure is the model's to see, not a crash
        result = {"ok": False, "error": describe_failure(exc)}
    result = act.as_recorded(name, result, secrets)
    secrets.clear()
    result, delta = settle_workspace(act, t, result)
    if rerun:
        origin = {}  # recorded with its intent
    if act.watch is not None:  # a result the model must not read is shown as handles
        result |= act.watch.hiding(name, result | result_of, act.state.version + 1)
        if handles and result.get("ok"):
            result["tainted"] = True  # what it made of hidden text is that text's
    act.emit(Kind.TOOL_RESULT, **result_of, rerun=rerun, **result, **delta, **shown, **origin)
    if unset:
        # not the model's mistake: stop, so a person fixes the vault and resumes
        act.emit(
            Kind.STATUS_CHANGED,
            status="needs_attention",
            reason=f"tool {name} could not be given its secrets: {unset}; fix that, "
            f"then `stead resume {act.record.agent_id}`",
        )
    if t.effect is Effect.EFFECTFUL:
        # an effect that cannot be safely repeated: shrink the window in which
        # a crash would leave its outcome unknown to this one call
        act.flush()


def _blocked(
    act: Activation,
    result_of: dict[str, Any],
    verdict: dict[str, Any],
    stopping: list[Violation],
) -> None:
    """A call a monitor stopped: no grant use and no approval is spent on it."""
    act.emit(
        Kind.TOOL_RESULT,
        **result_of,
        ok=False,
        refused=True,
        blocked=stopping[0].rule,
        error=f"blocked by monitor {stopping[0].rule}: {stopping[0].message}",
        verdict={**verdict, "decision": "blocked"},
    )


def secrets_for(act: Activation, t: Tool) -> dict[str, str]:
    """The secrets ``t`` declared, opened for this one call (never stored)."""
    if not t.secrets:
        return {}
    if act.vault is None:
        raise SecretError(f"tool {t.name} needs secrets but this runtime has no vault")
    return act.vault().for_call(act.record.tenant, act.record.agent_id, t.secrets, url=t.secrets_to)
