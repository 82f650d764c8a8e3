"""Messages and delegations between agents: signed, verified, never trusted for what they claim.

A sending agent's envelope is signed with its own Ed25519 key, opened from the
vault for that one signature. The receiver takes the sender's public key from
the sender's journal in the store, never from the message, and refuses (and
records, in its own journal) an envelope that is:

* unsigned, or signed by any key but the claimed sender's;
* from an agent that does not exist (in the receiver's tenant);
* older than :data:`~stead.governance.identity.MAX_AGE_SECONDS` or from the
  future, or one it has already received (a replay);
* claiming grants the sender does not hold (``body.claims``);
* a delegation of a grant the sender does not hold, cannot delegate, or that
  would be wider than the sender's own.

An envelope from another tenant's agent is not refused but answered exactly as
one to an agent that does not exist (:class:`~stead.errors.NotFound`, the
store's own words), and nothing is written to the receiver: a tenant learns
nothing of another's agents and cannot write into their journals.

What an accepted envelope may do is decided from the sender's grants in the
ledger: a delegation becomes a grant of the receiver that names its source,
and every use of it re-checks that source (revoking it revokes the delegation).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import GovernanceError, NotFound, SteadError
from ..governance.envelopes import envelope_problem
from ..governance.grants import check_valid_for, inactive_reason, parse_grant
from ..governance.identity import (
    IDENTITY_SECRET,
    check_shape,
    sign,
)
from ..ids import new_id
from ..integrity.keys import forget_identity, mint_identity
from ..journal import Kind, NewEvent
from ..state import State
from ..store.scoped import TenantStore

if TYPE_CHECKING:
    from ..ports import AgentPort, Messenger, RuntimePort


def make_envelope(
    rt: RuntimePort,
    sender: State,
    to: str,
    kind: str,
    body: Mapping[str, Any],
    message_id: str | None = None,
) -> dict[str, Any]:
    """A signed envelope from ``sender``, whose private key is opened from the vault to sign it."""
    private = rt.vault().get(sender.tenant, sender.agent_id, IDENTITY_SECRET)
    if private is None or sender.public_key is None:
        raise GovernanceError(
            f"agent {sender.agent_id} has no identity key in the vault (was the vault key "
            "changed?); it cannot sign"
        )
    envelope = {
        "v": 1,
        "id": message_id or new_id("msg", rt.clock),
        "kind": kind,
        "from": sender.agent_id,
        "to": to,
        "tenant": sender.tenant,
        "at": rt.clock.now(),
        "body": dict(body),
    }
    return sign(private, envelope)


def _problem(rt: RuntimePort, receiver: State, env: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Why the envelope is refused ("" if it is not), and what it carries if accepted."""
    try:
        sender: State | None = rt.store.load_state(env["from"])
    except NotFound:
        sender = None
    return envelope_problem(receiver, sender, env, rt.clock.now())


def deliver(rt: RuntimePort, envelope: Any) -> tuple[bool, str]:
    """Verify an envelope and record it in the receiver's journal, accepted or refused.

    Returns (accepted, what happened). A refusal is journaled as
    ``message_refused`` in the receiver's journal with the reason, except for an
    envelope to an agent of another tenant: that raises
    :class:`~stead.errors.NotFound` exactly as for a missing agent, and nothing is
    written anywhere.
    """
    ok, detail, _ = _deliver(rt, envelope)
    return ok, detail


def _delivered_before(rt: RuntimePort, receiver: State, env: Mapping[str, Any]) -> bool:
    """Whether this message reached the receiver already: a replay (or a sender's retry).

    Ids of plain messages are remembered for as long as a message can be fresh;
    a delegation's is found in the receiver's ledger events (an index) for good,
    so a retry long after can never record the same grant twice.
    """
    if env["id"] in receiver.seen_messages:
        return True
    if env.get("kind") != "delegation":
        return False
    added = rt.store.read_events_of_kinds(receiver.agent_id, [Kind.GRANT_ADDED])
    return any(e.data.get("message") == env["id"] for e in added)


def _only_within_tenant(rt: RuntimePort, env: Mapping[str, Any]) -> None:
    """Raise, exactly as for an agent that does not exist, unless the receiver is in
    the sender's tenant; write nothing anywhere.

    The sender is placed by its record in the store when it exists (an envelope's
    ``tenant`` is only a claim), else by that claim. Any other answer, or a
    refusal journaled in the receiver's journal, would tell another tenant that
    the agent exists and let it write there.
    """
    placed = env.get("tenant")
    with contextlib.suppress(NotFound):
        placed = rt.store.get_record(str(env.get("from"))).tenant
    # the sender's tenant's own view answers: its NotFound is the store's, word for word
    TenantStore(rt.store, placed if isinstance(placed, str) else "").get_record(str(env["to"]))


def _deliver(rt: RuntimePort, envelope: Any) -> tuple[bool, str, bool]:
    """:func:`deliver`, also saying whether the refusal was for a replay."""
    try:
        env = check_shape(envelope)
    except GovernanceError as exc:
        to = envelope.get("to") if isinstance(envelope, Mapping) else None
        if not isinstance(to, str):
            raise
        env, shape_problem = dict(envelope), str(exc)
    else:
        shape_problem = ""
    _only_within_tenant(rt, env)
    outcome: dict[str, Any] = {}

    def build(receiver: State) -> list[NewEvent]:
        problem = shape_problem
        child: dict[str, Any] = {}
        if not problem and _delivered_before(rt, receiver, env):
            problem = f"message {env['id']} was already received: a replay"
            outcome["replay"] = True
        if not problem:
            problem, child = _problem(rt, receiver, env)
        if problem:
            outcome.update(ok=False, detail=problem)
            return [
                NewEvent(
                    Kind.MESSAGE_REFUSED,
                    {
                        "message": env.get("id"),
                        "claimed_from": env.get("from"),
                        "kind": env.get("kind"),
                        "reason": problem,
                    },
                )
            ]
        if env["kind"] == "delegation":
            gid = new_id("gr", rt.clock)
            grant = {
                **child,
                "id": gid,
                "by": f"agent {env['from']}",
                "delegated_from": {"agent": env["from"], "grant": env["body"]["grant"]},
            }
            outcome.update(ok=True, detail=f"grant {gid} recorded", grant=gid)
            return [NewEvent(Kind.GRANT_ADDED, {"grant": grant, "message": env["id"]})]
        outcome.update(ok=True, detail="delivered")
        return [
            NewEvent(
                Kind.MESSAGE_RECEIVED,
                {
                    "message": env["id"],
                    "from": env["from"],
                    "kind": env["kind"],
                    "text": str(env["body"].get("text", "")),
                    "claims": list(env["body"].get("claims", []) or []),
                },
            )
        ]

    rt.append_as_person(str(env["to"]), build)
    return bool(outcome["ok"]), str(outcome["detail"]), bool(outcome.get("replay"))


def _held(sender: State, ref: str, now: float) -> dict[str, Any] | None:
    """The sender's grant named by id, or else its delegable grant for that tool
    (pattern), preferring one still usable (a used-up one is only a last resort,
    so the refusal can say why)."""
    if ref in sender.grants:
        return sender.grants[ref]
    matching = [g for _, g in sorted(sender.grants.items()) if g["tool"] == ref and g["delegable"]]
    live = [g for g in matching if inactive_reason(g, now) is None]
    chosen = live or matching
    return chosen[0] if chosen else None


def messenger_for(rt: RuntimePort) -> Messenger:
    """The callable an activation uses to send its agent's messages and delegations."""

    def send(act: AgentPort, action: Mapping[str, Any]) -> dict[str, Any]:
        message_id = f"msg_{act.record.agent_id}_{action['call_id']}"
        reserve: dict[str, Any] = {}
        try:
            if act.state.public_key is None:
                unkeyed = act.state
                _, event = mint_identity(rt, unkeyed)
                act.emit_event(event)
                try:
                    act.flush()
                except BaseException:
                    forget_identity(rt, unkeyed)
                    raise
            sender = act.state
            if action["type"] == "delegate":
                parent = _held(sender, action["grant"], rt.clock.now())
                if parent is None:
                    return {
                        "ok": False,
                        "message": message_id,
                        "error": f"this agent holds no delegable grant {action['grant']}",
                    }
                narrow = {**action.get("narrow", {})}
                if "valid_for" in narrow:
                    valid_for = check_valid_for(narrow.pop("valid_for"), "delegation.valid_for")
                    narrow["valid_until"] = rt.clock.now() + valid_for
                child = parse_grant({"tool": parent["tool"], **narrow}, "delegation")
                body: dict[str, Any] = {"grant": parent["id"], "child": child}
                kind = "delegation"
                if child.get("max_uses") is not None and parent.get("max_uses") is not None:
                    # the uses delegated are taken from the parent's, once delivered
                    reserve = {"parent": parent["id"], "reserved": int(child["max_uses"])}
            else:
                body, kind = {"text": action.get("text", "")}, action.get("kind", "message")
            envelope = make_envelope(rt, sender, action["to"], kind, body, message_id)
            ok, detail, replay = _deliver(rt, envelope)
        except SteadError as exc:
            return {"ok": False, "message": message_id, "error": str(exc)}
        if replay:
            # its id is this very action's: an earlier attempt got through before a crash
            ok, detail = True, "delivered earlier (this is a retry after a restart)"
        return {
            "ok": ok,
            "message": message_id,
            "detail" if ok else "error": detail,
            **(reserve if ok else {}),
        }

    return send
