"""The activation's side of governance: ask the gate, journal what it says.

A :class:`Governor` is made per activation. Right before a call executes it
asks :func:`stead.governance.gate.judge` with the agent's state as folded so
far, the tenant's policy as stored now, and the runtime clock. What is not
allowed is recorded here: a refusal as the call's result (so the model sees
it), a proposal, or an approval request that stops the agent until a person
answers. Actions in which an agent tries to widen its own authority are
refused and recorded the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NotFound
from ..governance.gate import Verdict, args_hash, judge
from ..governance.policy import CompiledPolicy, compile_policy
from ..ids import new_id
from ..journal import Kind
from ..state import State
from ..tools.base import Tool

if TYPE_CHECKING:
    from ..ports import AgentPort

ESCALATION_REASONS = {
    "grant": "an agent cannot grant itself scope; a person grants with `stead grant`",
    "approve": "an agent cannot approve a call; a person approves with `stead approve`",
    "set_autonomy": "an agent cannot change its autonomy; a person does with `stead autonomy`",
}


class Governor:
    """Judges one activation's calls and records what is not simply allowed."""

    def __init__(self, act: AgentPort) -> None:
        self.act = act
        self._policy: CompiledPolicy | None = None

    def policy(self) -> CompiledPolicy | None:
        """The tenant's policy in force now (read at every call, compiled once per version)."""
        tenant = self.act.record.tenant
        version = self.act.store.policy_version(tenant)
        if version == 0:
            return None
        if self._policy is None or self._policy.version != version:
            record = self.act.store.get_policy(tenant, version)
            if record is None:  # removed between the two reads: none is in force
                return None
            self._policy = compile_policy(record.text, record.version)
        return self._policy

    def policy_version(self) -> int:
        policy = self.policy()
        return policy.version if policy is not None else 0

    def policy_denial(self, tool: Tool, args: Mapping[str, Any]) -> str | None:
        """Why the tenant's policy denies this call outright, or None (a person's
        authority overrides autonomy and scope, never a policy's ``forbid``)."""
        policy = self.policy()
        if policy is None:
            return None
        state = self.act.state
        pv = policy.evaluate(
            agent_id=state.agent_id,
            tenant=state.tenant,
            name=state.name,
            tool=tool.name,
            effect=tool.effect.value,
            args=args,
            autonomy=state.tool_autonomy.get(tool.name, state.autonomy),
            now=self.act.clock.now(),
            grants=[],
        )
        return None if pv.decision != "deny" else f"policy version {pv.version}: {pv.reasons}"

    def _parent(self, agent_id: str) -> State | None:
        try:
            return self.act.store.load_state(agent_id)
        except NotFound:
            return None

    def judge(
        self,
        tool: Tool,
        call_id: str,
        args: Mapping[str, Any],
        taint: Mapping[str, Any] | None = None,
    ) -> Verdict:
        spec = self.act.record.spec
        return judge(
            self.act.state,
            call_id=call_id,
            tool=tool.name,
            effect=tool.effect.value,
            args=args,
            now=self.act.clock.now(),
            policy=self.policy(),
            parents=self._parent,
            out_of_scope=str(spec.get("out_of_scope") or "refuse"),
            taint=taint,
        )

    def hold(
        self,
        index: int,
        call: Mapping[str, Any],
        verdict: Verdict,
        findings: Sequence[str] = (),
    ) -> None:
        """Record a call that does not run now: refused, proposed, or awaiting approval
        (``findings``: what the monitors found, for the person asked)."""
        act = self.act
        shown = verdict.to_json()
        if verdict.decision == "deny":
            act.emit(
                Kind.TOOL_RESULT,
                **call,
                ok=False,
                refused=True,
                error=f"refused: {verdict.reason}",
                verdict=shown,
            )
        elif verdict.decision == "propose":
            pid = new_id("prop", act.clock, act.rng)
            act.emit(
                Kind.PROPOSAL_RECORDED,
                proposal_id=pid,
                call_id=call["call_id"],
                tool=call["tool"],
                args=call["args"],
                verdict=shown,
            )
            act.emit(
                Kind.TOOL_RESULT,
                **call,
                ok=False,
                proposed=pid,
                error=f"not executed: recorded as proposal {pid} for a person to accept "
                f"({verdict.reason})",
                verdict=shown,
            )
        else:
            for aid, why in verdict.lapsed:
                act.emit(Kind.APPROVAL_LAPSED, approval_id=aid, call_id=call["call_id"], reason=why)
            aid = new_id("apr", act.clock, act.rng)
            act.emit(
                Kind.APPROVAL_REQUESTED,
                approval_id=aid,
                call_id=call["call_id"],
                tool=call["tool"],
                args=call["args"],
                args_hash=args_hash(call["args"]),
                policy_version=verdict.policy_version,
                reason=verdict.reason,
                action=index,
                verdict=shown,
                **({"monitors": list(findings)} if findings else {}),
                # what fed the arguments, for the person asked (stead.integrity.inbox)
                **({"provenance": call["provenance"]} if "provenance" in call else {}),
                # which arguments were handles the runtime put the hidden values into
                **({"handles": call["handles"]} if "handles" in call else {}),
            )
            act.flush()  # the agent now waits, durably, holding nothing

    def refuse_escalation(self, index: int, action: Mapping[str, Any]) -> None:
        kind = action["type"]
        self.act.emit(
            Kind.GOVERNANCE_REFUSED,
            action=index,
            type=kind,
            requested=action.get("request"),
            reason=ESCALATION_REASONS[kind],
        )


def is_escalation(kind: str) -> bool:
    return kind in ESCALATION_REASONS
