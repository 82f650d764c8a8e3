"""Completion certificates: a signed, checkable record that an agent finished.

When a ``finish`` is accepted, the runtime issues a certificate: the goals with
the evidence of their checks (digests, not outputs), the summary, and the
version and hash of the journal's ``finish_claimed`` event, signed with the
agent's own Ed25519 key (see :mod:`.messages`). It is journaled as
``completion_certified``.

:func:`verify_certificate` checks a certificate against a store: the signature
is the agent's (by the public key in its journal, not the one in the file),
the journal verifies up to the certified event and that event's hash is the
one certified, and the certificate is exactly the one the runtime journaled.
Another agent receiving a completion can run the same check before acting on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, SecretError
from ..governance.identity import IDENTITY_SECRET, sign, signature_valid
from ..journal import Kind, verify_chain
from ..store.base import Store
from .keys import mint_identity

if TYPE_CHECKING:
    from ..ports import AgentPort, RuntimePort
    from .completion import Certifier

CERTIFICATE_VERSION = 1


def certifier_for(rt: RuntimePort) -> Certifier:
    """Signs completions with the agent's key; without a vault key, issues none."""

    def certify(act: AgentPort, body: Mapping[str, Any]) -> dict[str, Any] | None:
        try:
            vault = rt.vault()
        except SecretError:
            return None  # no vault key: the completion stands, uncertified
        state = act.state
        if state.public_key is None:
            _, event = mint_identity(rt, state)
            act.emit_event(event)
        private = vault.get(state.tenant, state.agent_id, IDENTITY_SECRET)
        if private is None:
            return None
        finish = body["finish"]  # the sealed finish_claimed event
        certificate = {
            "v": CERTIFICATE_VERSION,
            "kind": "completion_certificate",
            "agent_id": state.agent_id,
            "tenant": state.tenant,
            "name": state.name,
            "version": finish.seq,
            "head_hash": finish.hash,
            "completed_at": finish.at,
            "summary": body["summary"],
            "goals": body["goals"],
            "public_key": state.public_key,
        }
        if body.get("provenance"):
            # where the summary came from: an answer repeating untrusted text says so
            certificate["summary_provenance"] = body["provenance"]
        return sign(private, certificate)

    return certify


def journaled_certificate(store: Store, agent_id: str) -> dict[str, Any]:
    """The agent's certificate as its journal holds it."""
    found = store.read_events_of_kinds(agent_id, [Kind.COMPLETION_CERTIFIED])
    if not found:
        state = store.load_state(agent_id)
        raise NotFound(
            f"agent {agent_id} has no completion certificate (it is {state.status}; "
            "certificates are issued when a finish is accepted and a vault key is set)"
        )
    return dict(found[-1].data["certificate"])


def verify_certificate(store: Store, certificate: Any) -> list[str]:
    """Every reason the certificate does not hold against the store; [] if it does."""
    if not isinstance(certificate, Mapping) or certificate.get("kind") != "completion_certificate":
        return ["this is not a completion certificate"]
    agent_id = str(certificate.get("agent_id"))
    try:
        state = store.load_state(agent_id)
    except NotFound:
        return [f"no agent {agent_id} in this store"]
    problems = []
    if state.public_key is None or not signature_valid(state.public_key, certificate):
        problems.append(f"the signature is not made by the key of agent {agent_id}")
    version = certificate.get("version")
    if not isinstance(version, int) or not 1 <= version <= state.version:
        return [*problems, f"the journal of {agent_id} has no version {version}"]
    events = list(store.read_events(agent_id, 1, version))
    report = verify_chain(events)
    if not report.ok:
        problems.append(f"the journal does not verify at event {report.bad_seq}: {report.reason}")
    elif report.head_hash != certificate.get("head_hash"):
        problems.append(f"the journal's event {version} does not have the certified hash")
    try:
        journaled = journaled_certificate(store, agent_id)
    except NotFound as exc:
        problems.append(str(exc))
    else:
        if journaled != dict(certificate):
            problems.append("it differs from the certificate the runtime journaled")
    return problems
