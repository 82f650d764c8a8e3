"""Whether an envelope from another agent may be accepted: a pure decision.

The runtime (:mod:`stead.messaging.delivery`) loads the claimed sender's state
from the store and records the outcome; this module only decides, from the two
agents' states, the envelope and the time: the signature by the sender's own
key, its age, the grants it claims, and whether a delegation is narrower than
the grant it comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import GovernanceError
from ..state import State
from .grants import inactive_reason, narrower, parse_grant
from .identity import MAX_AGE_SECONDS, MAX_SKEW_SECONDS, signature_valid


def envelope_problem(
    receiver: State, sender: State | None, env: Mapping[str, Any], now: float
) -> tuple[str, dict[str, Any]]:
    """Why ``env`` is refused ("" if it is not), and the grant a delegation carries.

    ``sender`` is the claimed sender's state as the store holds it (None: no
    such agent); its public key, never the envelope's word, checks the signature.
    """
    if env["tenant"] != receiver.tenant or env["to"] != receiver.agent_id:
        return f"it is addressed to {env['to']} of tenant {env['tenant']}", {}
    if sender is None or sender.tenant != receiver.tenant:
        return f"no agent {env['from']} exists in this tenant", {}
    if "sig" not in env:
        return "it is not signed", {}
    if sender.public_key is None:
        return f"agent {env['from']} has no identity key, so nothing it signs can be verified", {}
    if not signature_valid(sender.public_key, env):
        return f"its signature is not made by the key of agent {env['from']}", {}
    if now - env["at"] > MAX_AGE_SECONDS:
        return f"it is stale: sent {now - env['at']:.0f} s ago (at most {MAX_AGE_SECONDS:.0f})", {}
    if env["at"] - now > MAX_SKEW_SECONDS:
        return "it is dated in the future", {}
    for gid in env["body"].get("claims", []) or []:
        grant = sender.grants.get(gid) if isinstance(gid, str) else None
        if grant is None or inactive_reason(grant, now) is not None:
            return f"it claims grant {gid}, which agent {env['from']} does not hold", {}
    if env["kind"] != "delegation":
        return "", {}
    gid = env["body"].get("grant")
    parent = sender.grants.get(gid) if isinstance(gid, str) else None
    if parent is None:
        return f"it delegates grant {gid}, which agent {env['from']} does not hold", {}
    lapsed = inactive_reason(parent, now)
    if lapsed is not None:
        # uses already delegated count as used: a grant is never given out twice
        return f"it delegates a grant agent {env['from']} can no longer use: {lapsed}", {}
    try:
        child = parse_grant(env["body"].get("child"), "delegated grant")
    except GovernanceError as exc:
        return f"the delegated grant is invalid: {exc}", {}
    wider = narrower(child, parent)
    if wider is not None:
        return f"the delegation is wider than the sender's grant {gid}: {wider}", {}
    return "", child
