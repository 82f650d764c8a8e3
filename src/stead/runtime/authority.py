"""What people do to an agent's authority: grants, revocations, autonomy, approvals, policy.

Every one of these is a journal event appended under the agent's lease (so it
never interleaves with a running step), naming the person and the time. None
of them can be produced by an agent: the model's decisions go through the
activation, which refuses such requests (see :mod:`.governed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..clock import Clock
from ..errors import GovernanceError, NotFound
from ..governance.gate import LEVELS
from ..governance.grants import check_valid_for, parse_grant
from ..governance.policy import settable_policy
from ..governance.scope import scope_report
from ..ids import new_id
from ..journal import Kind, NewEvent
from ..state import State
from ..store.base import Store
from ..upgrades.apply import upgrade

DEFAULT_APPROVAL_SECONDS = 15 * 60.0


def new_grant(
    obj: Mapping[str, Any], by: str, clock: Clock, where: str = "grant"
) -> dict[str, Any]:
    """A grant to record: checked, with its id, author, and ``valid_for`` made absolute."""
    grant = parse_grant({k: v for k, v in obj.items() if k != "valid_for"}, where)
    if obj.get("valid_for") is not None:
        grant["valid_until"] = clock.now() + check_valid_for(obj["valid_for"], f"{where}.valid_for")
        if grant["valid_from"] is not None and grant["valid_until"] <= grant["valid_from"]:
            raise GovernanceError(f"{where}: valid_for ends before valid_from")
    grant["id"] = new_id("gr", clock)
    grant["by"] = by
    grant["delegated_from"] = None
    return grant


class AuthorityActions:
    """People's actions on authority, mixed into :class:`~stead.runtime.runtime.Runtime`."""

    store: Store
    clock: Clock
    append_as_person: Callable[[str, Callable[[State], list[NewEvent]]], State]
    person: Callable[[], str]

    def upgrade(self, agent_id: str, spec: Any, **how: Any) -> Any:
        """Apply a new version of the agent's spec (:func:`stead.upgrades.apply.upgrade`)."""
        return upgrade(self, agent_id, spec, **how)  # type: ignore[arg-type]  # a Runtime

    def _now(self) -> float:
        return self.clock.now()

    def scope(self, agent_id: str) -> dict[str, Any]:
        """What the agent may do now, and until when (:func:`~stead.governance.scope.
        scope_report`): what ``stead scope``, the API and the page show."""
        state = self.store.load_state(agent_id)
        policy = self.store.get_policy(state.tenant)

        def find(other: str) -> State | None:
            try:
                return self.store.load_state(other)
            except NotFound:
                return None

        return scope_report(state, policy.version if policy else 0, self._now(), find)

    def grant(self, agent_id: str, grant: Mapping[str, Any], reason: str = "") -> dict[str, Any]:
        """Add a grant to the agent's scope; return it as recorded."""
        made = new_grant(
            {**grant, "reason": reason or grant.get("reason", "")}, self.person(), self.clock
        )

        def build(state: State) -> list[NewEvent]:
            _not_final(state)
            return [NewEvent(Kind.GRANT_ADDED, {"grant": made})]

        self.append_as_person(agent_id, build)
        return made

    def revoke(self, agent_id: str, grant_id: str, reason: str = "") -> State:
        """Revoke a grant; what was delegated from it stops working at its next use."""

        def build(state: State) -> list[NewEvent]:
            if grant_id not in state.grants:
                held = ", ".join(sorted(state.grants)) or "none"
                raise NotFound(f"agent {agent_id} holds no grant {grant_id}; its grants: {held}")
            return [
                NewEvent(
                    Kind.GRANT_REVOKED, {"grant": grant_id, "by": self.person(), "reason": reason}
                )
            ]

        return self.append_as_person(agent_id, build)

    def set_autonomy(
        self, agent_id: str, level: str, tool: str | None = None, reason: str = ""
    ) -> State:
        """Set the agent's autonomy level, or one tool's override of it."""
        if level not in LEVELS:
            raise GovernanceError(
                f"autonomy {level!r} is not a level; use one of {', '.join(LEVELS)}"
            )

        def build(state: State) -> list[NewEvent]:
            _not_final(state)
            return [
                NewEvent(
                    Kind.AUTONOMY_CHANGED,
                    {"level": level, "tool": tool, "by": self.person(), "reason": reason},
                )
            ]

        return self.append_as_person(agent_id, build)

    def pending_approvals(
        self, tenant: str | None = None, agent_id: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """(agent id, approval) for every approval a person has not answered yet (of
        ``agent_id`` only, if given)."""
        out = []
        for summary in self.store.list_agents(tenant):
            # a hibernated agent may sleep on an approval (answering it wakes the
            # agent), and a suspended one still has the approval it asked for
            if summary.status not in ("waiting", "hibernated", "needs_attention"):
                continue
            if agent_id is not None and summary.agent_id != agent_id:
                continue
            state = self.store.load_state(summary.agent_id)
            waiting = {a["approval_id"]: a for a in state.approvals.values()
                       if a["status"] == "requested"}  # fmt: skip
            if not waiting:
                continue
            # the state keeps a hash of the arguments; the person sees them whole, read
            # from the request's own event (by its seq; found by kind if from before that)
            asked = [
                e
                for a in waiting.values()
                if a.get("seq")
                for e in self.store.read_events(summary.agent_id, a["seq"], a["seq"])
            ]
            if len(asked) < len(waiting):
                asked = self.store.read_events_of_kinds(summary.agent_id, [Kind.APPROVAL_REQUESTED])
            shown = {e.data["approval_id"]: e.data for e in asked
                     if e.kind == Kind.APPROVAL_REQUESTED}  # fmt: skip
            for aid, a in waiting.items():
                request = shown.get(aid, {})
                out.append((state.agent_id, {**a, "args": request.get("args"),
                                             "verdict": request.get("verdict"),
                                             "monitors": request.get("monitors", []),
                                             "provenance": request.get("provenance")}))  # fmt: skip
        return sorted(out, key=lambda pair: pair[1]["approval_id"])

    def _approval_owner(self, approval_id: str) -> str:
        for agent_id, a in self.pending_approvals():
            if a["approval_id"] == approval_id:
                return agent_id
        raise NotFound(
            f"no approval {approval_id} is waiting for an answer; `stead approvals` lists them"
        )

    def approve(
        self, approval_id: str, valid_for: float = DEFAULT_APPROVAL_SECONDS
    ) -> tuple[str, State]:
        """Approve one pending call for ``valid_for`` seconds from now; it is single-use."""
        check_valid_for(valid_for, "--valid-for")
        agent_id = self._approval_owner(approval_id)
        now = self._now()

        def build(state: State) -> list[NewEvent]:
            _requested(state, approval_id)
            return [
                NewEvent(
                    Kind.APPROVAL_GRANTED,
                    {
                        "approval_id": approval_id,
                        "by": self.person(),
                        "valid_from": now,
                        "valid_until": now + valid_for,
                    },
                )
            ]

        return agent_id, self.append_as_person(agent_id, build)

    def deny(self, approval_id: str, reason: str) -> tuple[str, State]:
        """Deny one pending call: the model sees it refused with the reason."""
        if not reason.strip():
            raise GovernanceError("a denial needs a reason (--reason TEXT); the agent is shown it")
        agent_id = self._approval_owner(approval_id)

        def build(state: State) -> list[NewEvent]:
            a = _requested(state, approval_id)
            who = self.person()
            events = [
                NewEvent(
                    Kind.APPROVAL_DENIED,
                    {"approval_id": approval_id, "by": who, "reason": reason},
                )
            ]
            inflight = state.inflight or {"actions": []}
            for index, action in enumerate(inflight["actions"]):
                if action.get("call_id") == a["call_id"]:
                    events.append(
                        NewEvent(
                            Kind.TOOL_RESULT,
                            {
                                "action": index,
                                "call_id": a["call_id"],
                                "tool": a["tool"],
                                "args": action.get("args", {}),
                                "ok": False,
                                "refused": True,
                                "error": f"refused: {who} denied approval {approval_id}: {reason}",
                            },
                        )
                    )
            return events

        return agent_id, self.append_as_person(agent_id, build)

    def set_policy(self, tenant: str, text: str) -> int:
        """Store a new policy version for the tenant; a text that does not parse is refused."""
        settable_policy(text)
        return self.store.put_policy(tenant, text, self.person(), self._now())


def _not_final(state: State) -> None:
    if state.is_final:
        raise GovernanceError(f"agent {state.agent_id} is {state.status}; its authority is closed")


def _requested(state: State, approval_id: str) -> dict[str, Any]:
    a = state.approvals.get(approval_id)
    if a is None or a["status"] != "requested":
        raise NotFound(f"approval {approval_id} is no longer waiting for an answer")
    return a
