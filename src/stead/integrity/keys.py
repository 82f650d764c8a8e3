"""An agent's identity key: minted with the agent, sealed in the vault, named in its journal.

The key signs the agent's messages, certificates and archives, and every
commit's anchor (:mod:`stead.integrity.anchoring`). An agent created, forked or
imported by a process that can open the vault gets its key in its first
transaction, and that transaction stores an anchor signed with it: so a keyed
agent without an anchor, or with an unsigned one, has been tampered with.
An agent created without a vault key gets one when it first needs to sign
(:func:`ensure_identity`), in the same commit as the signed anchor that follows.

The private half is sealed in the vault before the agent's events are written;
if that write fails, it is deleted again (:func:`forget_identity`), since a key
the journal does not name would make the agent's unsigned anchors look stripped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import SecretError, SteadError
from ..governance.identity import IDENTITY_SECRET, new_key_pair
from ..integrity.anchoring import Signer
from ..journal import Kind, NewEvent
from ..state import State
from ..store.base import AgentRecord
from ..store.scoped import TenantStore

if TYPE_CHECKING:
    from ..ports import RuntimePort


def mint_identity(rt: RuntimePort, state: State) -> tuple[Signer, NewEvent]:
    """A new key pair for the agent: the private half sealed in the vault, and the
    event that journals the public half (for whoever holds the agent's lease to append)."""
    private, public = new_key_pair()
    rt.vault().set_reserved(
        state.tenant, IDENTITY_SECRET, private, agent_id=state.agent_id, at=rt.clock.now()
    )
    event = NewEvent(Kind.IDENTITY_CREATED, {"public_key": public, "algorithm": "ed25519"})
    return Signer(private, public), event


def create_keyed(
    rt: RuntimePort, record: AgentRecord, events: Sequence[NewEvent], *, required: bool = False
) -> State:
    """Store a new agent with ``events`` and, when the vault opens, its identity key.

    With a key, the creation's anchor is signed by it. Without a vault key the
    agent is stored unkeyed, unless ``required`` (then the vault's error is raised
    before anything is written).
    """
    try:
        rt.vault()
    except SecretError:
        if required:
            raise
        return rt.store.create_agent(record, events, rt.clock.now())
    if isinstance(rt.store, TenantStore):
        rt.store.claim_new(record.agent_id)  # its key is sealed before the agent exists
    fresh = State(agent_id=record.agent_id, tenant=record.tenant)
    signer, identity = mint_identity(rt, fresh)
    try:
        return rt.store.create_agent(record, [*events, identity], rt.clock.now(), signer.sign)
    except BaseException:
        forget_identity(rt, fresh)
        raise


def ensure_identity(rt: RuntimePort, agent_id: str) -> str:
    """The agent's public key, minting its key pair if it has none (takes its lease)."""

    minted: list[State] = []

    def build(s: State) -> list[NewEvent]:
        if s.public_key is not None:
            return []
        minted.append(s)
        return [mint_identity(rt, s)[1]]

    try:
        key = rt.append_as_person(agent_id, build).public_key
    except BaseException:
        for s in minted[-1:]:
            forget_identity(rt, s)
        raise
    assert key is not None
    return key


def forget_identity(rt: RuntimePort, state: State) -> None:
    """Drop a key pair whose ``identity_created`` was never committed."""
    with contextlib.suppress(SteadError):
        try:
            named = rt.store.load_state(state.agent_id).public_key
        except SteadError:
            named = None  # the agent was never stored
        if named is None:
            rt.store.delete_secret(state.tenant, state.agent_id, IDENTITY_SECRET)
