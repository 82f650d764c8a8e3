"""Anchoring an agent's journal: checked before every activation, signed at every commit.

The hash chain shows that the journal is self-consistent; it cannot show that
it is the journal stead wrote, since anyone who can write the database can
re-hash it. So each commit also stores an anchor (:mod:`stead.store.anchors`):
where the journal ends, the hash of the state row written with it, the seq up
to which the writer had checked the chain, and, when the agent has an identity
key in the vault, the agent's Ed25519 signature over all of that.

Before an activation runs anything (:meth:`Anchoring.check`, called from
``Activation.acquire``), and so before every ``run``, ``resume``, ``send``,
``approve`` or other person's input, the runtime refuses the agent unless:

1. its state row is at the version and head hash its last commit left, and
   hashes to what that commit wrote (an edited state row is refused; a row
   refolded by a migration is accepted after a full check that it is the fold
   of the journal);
2. when the agent has an identity key, that commit's anchor is signed by it
   (a re-hashed, cut or re-ordered journal, or a state row rewritten to match,
   cannot be re-signed without the vault key);
3. the events written since the last check (after ``verified``) recompute to
   their hashes and link up to the head: an edited, deleted or swapped event of
   the last activation is refused. Earlier events were checked when they were
   new; an edit of those is found by ``stead audit verify``, which walks the
   whole chain. So resuming costs the events of the last activation, not the
   agent's whole history;
4. its spec is the one its first event and its anchor seal, the columns of its
   row are what its state says, and the lease just taken is above the epoch of
   its last commit (:mod:`stead.integrity.sealing`).

:func:`check_record` makes the same check without a lease, for whoever is about
to import what a spec names outside an activation.

Creating, forking or importing an agent stores its first anchor, signed when
the vault opens (the agent then gets its identity key in that same
transaction, :mod:`stead.integrity.keys`). So a keyed agent without an anchor has
had it deleted, and is refused; an unkeyed one without an anchor (made before
anchors were stored at creation) is checked in full once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..errors import IntegrityError, SecretError
from ..governance import identity
from ..governance.identity import IDENTITY_SECRET
from ..governance.ledger import LEDGER_KINDS, verify_ledger
from ..journal import GENESIS_HASH, Event, verify_chain
from ..sandbox.secrets import Vault
from ..state import State
from ..store.anchors import Anchor, spec_digest, state_digest
from ..store.base import AgentRecord, Store
from .chaincheck import audit_journal
from .sealing import Sealed, problems

RECHECKED = 1_000
"""How many of its newest events an activation leaves for the next one to check.

The writer hashed every event it commits, so it could claim them all checked;
it claims all but these, so that an edit of what the last steps did is still
refused at the next activation, at a cost bounded by this number (about 17 ms
at 17 µs an event), however long the activation ran. Older edits are the
audit's to find, as they always were for earlier activations."""


@dataclass(frozen=True, slots=True)
class Signer:
    """An agent's identity key, opened from the vault for the length of one activation."""

    private_hex: str
    public_hex: str

    @classmethod
    def from_private(cls, private_hex: str) -> Signer:
        return cls(private_hex, identity.public_of(private_hex))

    def sign(self, anchor: Anchor) -> Anchor:
        sig = identity.sign(self.private_hex, anchor.signed_fields())["sig"]
        return replace(anchor, public_key=self.public_hex, signature=sig)


def signature_valid(anchor: Anchor, public_hex: str) -> bool:
    """True when ``anchor`` carries a signature that ``public_hex`` made over it."""
    return bool(anchor.signature) and identity.signature_valid(
        public_hex, {**anchor.signed_fields(), "sig": anchor.signature}
    )


def vault_key(vault: Vault, state: State) -> Signer | None:
    """The agent's identity key as the vault holds it (None: it has none).

    Raises :class:`~stead.errors.IntegrityError` when the journal names a key
    that is not the vault's (the journal, or the vault row, was replaced).
    """
    agent = state.agent_id
    try:
        private = vault.get(state.tenant, agent, IDENTITY_SECRET)
    except SecretError as exc:
        raise IntegrityError(
            f"agent {agent}: its identity key does not open with this vault key ({exc}); "
            "its journal's signatures cannot be checked. Use the vault key it was made with"
        ) from None
    if private is None:
        if state.public_key is not None:
            raise IntegrityError(
                f"agent {agent}: its journal names identity key {state.public_key[:16]}… but "
                "the vault holds no key for it; its journal cannot be trusted. Run `stead "
                f"audit verify {agent}` and restore the store from a backup"
            )
        return None
    signer = Signer.from_private(private)
    if state.public_key is not None and state.public_key != signer.public_hex:
        raise IntegrityError(
            f"agent {agent}: the identity key its journal names is not the one in the vault: "
            f"its journal was rewritten or the vault row replaced. Run `stead audit verify "
            f"{agent}` and restore the store from a backup"
        )
    return signer


def signer_for(vault: Callable[[], Vault] | None, state: State) -> Signer | None:
    """The key this process signs the agent's commits with, or None (not anchored).

    An agent whose journal names an identity key is signed by it on every commit,
    so a process that cannot open the vault may not write to it.
    """
    opened = None
    if vault is not None:
        try:
            opened = vault()
        except SecretError:
            opened = None
    if opened is None:
        if state.public_key is not None:
            raise SecretError(
                f"agent {state.agent_id} signs every commit of its journal with its identity "
                "key, and this process has no vault key to open it: set STEAD_SECRET_KEY (or "
                "STEAD_SECRET_KEY_FILE) to the vault key and retry"
            )
        return None
    return vault_key(opened, state)


def _refuse(agent: str, what: str, seq: int | None = None) -> IntegrityError:
    return IntegrityError(
        f"agent {agent}: {what}; it will not run on a journal, state or spec it cannot "
        f"trust. Run `stead audit verify {agent}` and restore the store from a backup",
        seq=seq,
    )


def _full_check(store: Store, state: State) -> None:
    report = audit_journal(store, state.agent_id)
    if not report.ok:
        where = f"event {report.bad_event}: " if report.bad_event is not None else ""
        raise _refuse(state.agent_id, f"{where}{report.reason}", report.bad_event)


def _check_tail(store: Store, state: State, verified: int) -> None:
    """The events after ``verified`` recompute to their hashes and end at the state's head."""
    agent = state.agent_id
    if verified > state.version:
        raise _refuse(agent, f"its anchor says events up to {verified} were checked, past its end")
    start = max(verified, 1)
    try:
        events = list(store.read_events(agent, start))
    except IntegrityError as exc:
        raise _refuse(agent, f"event {exc.seq} cannot be read: {exc}", exc.seq) from None
    prev = events[0].prev_hash if events and start > 1 else GENESIS_HASH
    chain = verify_chain(events, first_seq=start, prev_hash=prev)
    if not chain.ok:
        raise _refuse(
            agent, f"event {chain.bad_seq} does not verify: {chain.reason}", chain.bad_seq
        )
    end = start + chain.events - 1
    if end != state.version or chain.head_hash != state.head_hash:
        raise _refuse(
            agent,
            f"its journal ends at event {end} but its state is at version {state.version}",
            end + 1,
        )


def check_before_run(
    store: Store,
    state: State,
    signer: Signer | None,
    *,
    record: AgentRecord | None = None,
    ledger: list[Event] | None = None,
    epoch: int | None = None,
) -> int:
    """Refuse an agent whose journal, state row, spec or row does not match its last commit.

    ``record`` is the agent's record as the caller will use it (default: read
    now), ``ledger`` its ledger events if the caller has read them, ``epoch``
    the lease it holds (None: none, then the lease is not compared). Returns
    the version up to which the chain is now checked (the state's).
    """
    agent = state.agent_id
    anchor = store.get_anchor(agent)
    verified = _check_journal(store, state, signer, anchor)
    # the state row is trusted now; what the row says beside it must agree with it
    record = store.get_record(agent) if record is None else record
    if ledger is None:
        ledger = store.read_events_of_kinds(agent, LEDGER_KINDS)
    found = problems(
        record, store.get_row(agent), state, Sealed.of(ledger, anchor, state), anchor, epoch
    )
    if found:
        raise _refuse(agent, "; ".join(found))
    return verified


def _check_journal(store: Store, state: State, signer: Signer | None, anchor: Anchor | None) -> int:
    agent = state.agent_id
    if anchor is None:  # made before creation stored an anchor, and never run since
        if signer is not None:  # a keyed agent's creation stored a signed anchor
            raise _refuse(agent, "it has an identity key but its last commit left no anchor")
        _full_check(store, state)
        return state.version
    if (anchor.version, anchor.head_hash) != (state.version, state.head_hash):
        raise _refuse(
            agent,
            f"its state row is at version {state.version} but its last commit left version "
            f"{anchor.version} (head {anchor.head_hash[:16]}…): the state row, the journal's "
            "end or the anchor was changed outside stead",
        )
    if signer is not None and not signature_valid(anchor, signer.public_hex):
        raise _refuse(
            agent,
            "its last commit is not signed by its identity key"
            if not anchor.signed
            else "the signature on its last commit does not verify with its identity key",
        )
    if state_digest(state) != anchor.state_hash:
        # edited outside stead, or refolded by a migration: only the fold decides
        _full_check(store, state)
        return state.version
    _check_tail(store, state, anchor.verified)
    return state.version


def check_record(store: Store, record: AgentRecord, vault: Callable[[], Vault] | None) -> None:
    """Refuse (raise) to use ``record`` unless the agent's spec, row, journal and state
    are what its last commit sealed: the check an activation makes, without a lease,
    for a caller about to import what the spec names (its tools, its monitors)."""
    state = store.load_state(record.agent_id)
    ledger = store.read_events_of_kinds(record.agent_id, LEDGER_KINDS)
    verify_ledger(state, ledger)
    check_before_run(store, state, signer_for(vault, state), record=record, ledger=ledger)


class Anchoring:
    """An activation's side of anchoring: check at acquire, sign every commit."""

    def __init__(self, vault: Callable[[], Vault] | None) -> None:
        self._vault = vault
        self.signer: Signer | None = None
        self.verified = 0
        self.spec_hash = ""  # the spec checked at acquire, which every commit pins

    def check(self, store: Store, record: AgentRecord, state: State, epoch: int) -> None:
        """Refuse the agent (raise) unless the scope it acts under is its journal's
        (:func:`~stead.governance.ledger.verify_ledger`), its journal, state row, spec
        and row match its last commit, and the lease at ``epoch`` is newer than it."""
        ledger = store.read_events_of_kinds(state.agent_id, LEDGER_KINDS)
        verify_ledger(state, ledger)
        self.signer = signer_for(self._vault, state)
        self.verified = check_before_run(
            store, state, self.signer, record=record, ledger=ledger, epoch=epoch
        )
        self.spec_hash = spec_digest(record.spec)

    def anchor(self, state: State, epoch: int) -> Anchor:
        """The anchor of a commit that leaves ``state``, written under the lease at
        ``epoch``; signed when the agent has a key."""
        if state.public_key is not None and (
            self.signer is None or self.signer.public_hex != state.public_key
        ):
            self.signer = signer_for(self._vault, state)  # an identity made in this activation
        # what this activation wrote it hashed itself: only the newest events stay
        # for the next check (see RECHECKED)
        verified = max(self.verified, state.version - RECHECKED)
        # an upgrade journaled in this activation pins its new spec from its commit on
        spec_hash = state.spec_digest or self.spec_hash
        anchor = Anchor.of(state, verified, spec_hash=spec_hash, epoch=epoch)
        return anchor if self.signer is None else self.signer.sign(anchor)
