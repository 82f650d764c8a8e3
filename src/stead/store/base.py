"""The store interface every backend implements.

A store keeps, per agent: a static record (id, tenant, name, spec), an
append-only hash-chained journal, the materialised state written in the same
transaction as the events, and a lease with a fencing epoch.

Backends implement a handful of primitive operations (``_write``,
``read_events``, the lease operations…); sealing events into the hash chain and
folding them into the new state happens once, here, in :meth:`Store.commit`, so
every backend stores exactly the same bytes. Nothing above this interface may
assume a particular database: a backend shared by many workers on many hosts
must be able to implement it with ordinary transactions.

Atomicity guarantees every backend gives (the conformance suite checks them):

* ``_write`` stores all of its events and the new state, or nothing;
* it refuses, and stores nothing, when the lease epoch it was given is not the
  agent's current epoch (:class:`~stead.errors.StaleEpoch`) or when the agent's
  stored version is not the one the caller based its change on
  (:class:`~stead.errors.VersionConflict`);
* ``acquire_lease`` is a compare-and-set: of any number of concurrent callers,
  at most one gets the lease and every acquisition raises the epoch.
"""

from __future__ import annotations

import abc
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import NotFound, StaleEpoch, SteadError, StoreError, VersionConflict
from ..journal import Event, Kind, NewEvent, seal
from ..state import State, apply, fold
from .anchors import Anchor, spec_digest
from .history import HistoryEntry
from .snapshot_rows import SnapshotRecord as SnapshotRecord
from .snapshot_rows import consumed_message as consumed_message
from .snapshot_rows import no_snapshot_message as no_snapshot_message
from .snapshot_rows import snapshot_made as snapshot_made


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """What never changes about an agent once it is created."""

    agent_id: str
    tenant: str
    name: str
    spec: dict[str, Any]
    created_at: float


@dataclass(frozen=True, slots=True)
class AgentRow:
    """The columns of an agent's row that a store finds, lists and routes it by.

    Each is a copy of a field of its state row, written in the same transaction
    (``wake_at`` is its timer's due time), and must stay one:
    :mod:`stead.integrity.sealing` refuses an agent whose columns say otherwise.
    """

    agent_id: str
    tenant: str
    name: str
    status: str
    version: int
    wake_at: float | None


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to run an agent, held by one worker until ``expires_at``.

    ``epoch`` rises with every acquisition; writes carry it so the store can
    refuse a worker that lost its lease without knowing it (fencing).
    """

    agent_id: str
    owner: str
    epoch: int
    expires_at: float

    def live(self, now: float) -> bool:
        return self.expires_at > now


@dataclass(frozen=True, slots=True)
class AgentSummary:
    """One row of an agent listing."""

    agent_id: str
    tenant: str
    name: str
    status: str
    version: int
    updated_at: float


@dataclass(frozen=True, slots=True)
class PolicyRecord:
    """One version of a tenant's policy text."""

    tenant: str
    version: int
    text: str
    set_by: str
    set_at: float


def check_write(agent_id: str, epoch: int, current_epoch: int, expected: int, stored: int) -> None:
    """Refuse a write under a lease that is no longer the agent's (:class:`StaleEpoch`)
    or based on a version that is not the stored one (:class:`VersionConflict`): the
    check every backend makes inside its write transaction."""
    if epoch != current_epoch:
        raise StaleEpoch(
            f"agent {agent_id}: write under lease epoch {epoch} refused, "
            f"the current epoch is {current_epoch}; another worker has "
            "taken over this agent"
        )
    if stored != expected:
        raise VersionConflict(
            f"agent {agent_id}: write based on version {expected} refused, "
            f"the agent is at version {stored}; reload and retry"
        )


def renewal_refused(lease: Lease) -> StaleEpoch:
    """What a backend raises when a lease it was asked to renew is no longer held."""
    return StaleEpoch(
        f"agent {lease.agent_id}: lease epoch {lease.epoch} was "
        "released or taken over by another worker"
    )


def wake_at(state: State) -> float | None:
    """When the agent's timer is due, for the store's index of timers."""
    return None if state.timer is None else float(state.timer["due_at"])


BIRTH_KINDS = (Kind.AGENT_CREATED, Kind.AGENT_FORKED, Kind.AGENT_IMPORTED)
"""The kinds of an agent's first event: the one that carries its spec's digest."""
SPEC_KINDS = (*BIRTH_KINDS, Kind.SPEC_UPGRADED)
"""The kinds that seal an agent's spec: its birth, and each upgrade since."""


def upgraded_spec(events: Iterable[Event]) -> dict[str, Any] | None:
    """The spec the last ``spec_upgraded`` of ``events`` puts in force (None: none).

    Every backend's write replaces the ``spec`` column with it in the transaction
    that stores the event, so the column and the journal never say two things."""
    spec = None
    for ev in events:
        if ev.kind == Kind.SPEC_UPGRADED:
            spec = dict(ev.data["spec"])
    return spec


RUN_STATUSES = ("created", "running")
"""Statuses in which an agent has work a worker should take."""
IDLE_STATUSES = ("waiting", "needs_attention")
"""Statuses in which an agent waits (for input, an approval, a timer or a person)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One agent's sealed events and the state they fold to, ready to append."""

    events: Sequence[Event]
    state: State
    expected_version: int
    epoch: int
    anchor: Anchor | None = None
    """The commit's anchor (signed, when the writer could); None: an unsigned one."""

    def anchor_or_default(self) -> Anchor:
        return self.anchor if self.anchor is not None else Anchor.of(self.state, epoch=self.epoch)


def check_batch(batch: Batch) -> None:
    """Refuse a batch whose events do not continue its chain or whose state is not theirs."""
    events = batch.events
    first = events[0]
    if first.seq != batch.expected_version + 1 or any(
        b.seq != a.seq + 1 or b.prev_hash != a.hash for a, b in itertools.pairwise(events)
    ):
        raise StoreError(
            f"agent {first.agent_id}: events to append do not continue the chain from "
            f"version {batch.expected_version}"
        )
    if batch.state.version != events[-1].seq or batch.state.head_hash != events[-1].hash:
        raise StoreError(
            f"agent {first.agent_id}: the state to store is not the state after the "
            "last event appended"
        )
    anchor = batch.anchor
    if anchor is not None and (anchor.agent_id, anchor.version, anchor.head_hash) != (
        batch.state.agent_id,
        batch.state.version,
        batch.state.head_hash,
    ):
        raise StoreError(f"agent {first.agent_id}: the anchor to store is not this commit's")


def lease_held_message(lease: Lease, now: float) -> str:
    """The one wording of "someone else is running this agent"."""
    return (
        f"agent {lease.agent_id} is being run by worker {lease.owner} (lease epoch "
        f"{lease.epoch}, {lease.expires_at - now:.0f}s left); wait for it to finish "
        "or for its lease to expire"
    )


class Store(abc.ABC):
    """One interface, every backend. See the module docstring for guarantees."""

    #: the schema version this code writes; a database newer than it is refused
    schema_version: int = 1

    # -- agents ---------------------------------------------------------------

    def create_agent(
        self,
        record: AgentRecord,
        events: Sequence[NewEvent],
        at: float,
        sign: Callable[[Anchor], Anchor] | None = None,
    ) -> State:
        """Create an agent and append its first events (outside any lease).

        Its anchor is stored with them, checked up to its last event (the
        caller made them all), and signed by ``sign`` when the agent was created
        with an identity key: so every keyed agent has a signed anchor from its
        first transaction on, and one without is refused. The digest of the
        record's spec goes into its first event (``spec_digest``) and into the
        anchor, so the spec is sealed from the agent's creation on
        (:mod:`stead.integrity.sealing`).
        """
        digest = spec_digest(record.spec)
        first = events[0] if events else None
        if first is not None and first.kind in BIRTH_KINDS:
            events = [NewEvent(first.kind, {**first.data, "spec_digest": digest}), *events[1:]]
        sealed = seal(record.agent_id, 1, State().head_hash, at, 0, events)
        state = fold(sealed)
        anchor = Anchor.of(state, state.version, spec_hash=digest)
        self._create(record, sealed, state, anchor if sign is None else sign(anchor), at)
        return state

    @abc.abstractmethod
    def _create(
        self, record: AgentRecord, events: Sequence[Event], state: State, anchor: Anchor, at: float
    ) -> None:
        """Insert the record, its first events, state and anchor; fail if the id exists."""

    @abc.abstractmethod
    def get_record(self, agent_id: str) -> AgentRecord:
        """The agent's record, or :class:`~stead.errors.NotFound`."""

    @abc.abstractmethod
    def load_state(self, agent_id: str) -> State:
        """The latest materialised state, or :class:`~stead.errors.NotFound`."""

    @abc.abstractmethod
    def get_row(self, agent_id: str) -> AgentRow:
        """The columns the agent is found and routed by, or :class:`~stead.errors.NotFound`."""

    @abc.abstractmethod
    def list_agents(self, tenant: str | None = None) -> list[AgentSummary]:
        """Every agent (of ``tenant``, if given), oldest first."""

    # -- the journal ----------------------------------------------------------

    def commit(
        self, state: State, events: Sequence[NewEvent], *, epoch: int, at: float
    ) -> tuple[list[Event], State]:
        """Append ``events`` to the agent whose current state is ``state``.

        Returns the sealed events and the new state. Raises
        :class:`~stead.errors.StaleEpoch` or :class:`~stead.errors.VersionConflict`
        without storing anything when another writer got there first.
        """
        if not events:
            return [], state
        sealed = seal(state.agent_id, state.version + 1, state.head_hash, at, epoch, events)
        new_state = state
        for ev in sealed:
            new_state = apply(new_state, ev)
        self._write(
            state.agent_id,
            sealed,
            new_state,
            expected_version=state.version,
            epoch=epoch,
            at=at,
            anchor=Anchor.of(new_state, epoch=epoch),
        )
        return sealed, new_state

    def append(
        self,
        events: Sequence[Event],
        state: State,
        *,
        expected_version: int,
        epoch: int,
        at: float,
        anchor: Anchor | None = None,
    ) -> None:
        """Store events already sealed onto the chain, and the state they fold to.

        For writers that seal and fold as they go (an activation batching a
        step's events): ``events`` must continue the chain from
        ``expected_version`` and ``state`` must be their fold onto the stored
        state, which :func:`stead.integrity.audit.audit` can check afterwards.
        """
        if not events:
            return
        batch = Batch(events, state, expected_version, epoch, anchor)
        check_batch(batch)
        self._write(
            events[0].agent_id,
            events,
            state,
            expected_version=expected_version,
            epoch=epoch,
            at=at,
            anchor=batch.anchor_or_default(),
        )

    def append_many(self, batches: Sequence[Batch], at: float) -> list[SteadError | None]:
        """Append several agents' batches; report each one's refusal (or None).

        Backends that can put them in one transaction do (group commit); this
        default stores them one by one with the same per-batch outcome.
        """
        results: list[SteadError | None] = []
        for b in batches:
            try:
                self.append(
                    b.events,
                    b.state,
                    expected_version=b.expected_version,
                    epoch=b.epoch,
                    at=at,
                    anchor=b.anchor,
                )
                results.append(None)
            except (StoreError, NotFound) as exc:
                results.append(exc)
        return results

    @abc.abstractmethod
    def _write(
        self,
        agent_id: str,
        events: Sequence[Event],
        state: State,
        *,
        expected_version: int,
        epoch: int,
        at: float,
        anchor: Anchor,
    ) -> None:
        """Atomically check epoch and version, insert events, replace state and anchor."""

    @abc.abstractmethod
    def read_events(
        self, agent_id: str, from_seq: int = 1, to_seq: int | None = None
    ) -> Iterator[Event]:
        """Events with ``from_seq <= seq <= to_seq`` in order, as stored."""

    @abc.abstractmethod
    def get_anchor(self, agent_id: str) -> Anchor | None:
        """The anchor of the agent's last append (None: none since its creation), or NotFound."""

    def read_events_of_kinds(self, agent_id: str, kinds: Iterable[str]) -> list[Event]:
        """The agent's events of the given kinds, in order, as stored.

        Backends with an index on kind override this so that reading an agent's
        few governance events does not read its whole journal.
        """
        wanted = set(kinds)
        return [e for e in self.read_events(agent_id) if e.kind in wanted]

    def state_at(self, agent_id: str, version: int) -> State:
        """The agent's state as it was right after event ``version``."""
        latest = self.load_state(agent_id)
        if version < 1 or version > latest.version:
            raise NotFound(
                f"agent {agent_id} has versions 1 to {latest.version}; "
                f"there is no version {version}"
            )
        if version == latest.version:
            return latest
        return fold(self.read_events(agent_id, 1, version))

    # -- leases ---------------------------------------------------------------

    @abc.abstractmethod
    def acquire_lease(
        self, agent_id: str, owner: str, ttl: float, now: float, *, takeover: str | None = None
    ) -> Lease:
        """Take the agent's lease if it is free, expired, or held by ``takeover``.

        Every acquisition raises the epoch. Raises :class:`~stead.errors.LeaseHeld`
        naming the holder when a live lease is held by someone else.
        """

    @abc.abstractmethod
    def renew_lease(self, lease: Lease, ttl: float, now: float) -> Lease:
        """Extend a lease still held at its epoch, else raise StaleEpoch."""

    def renew_leases(self, leases: Sequence[Lease], ttl: float, now: float) -> list[Lease | None]:
        """:meth:`renew_lease` for many leases at once: each one's renewal, or None
        where it is no longer held at its epoch. A worker that keeps thousands of
        agents in flight renews them all in one call; a backend that can, in one
        statement. Raises :class:`~stead.errors.StoreError` only if the store
        cannot be used at all."""
        out: list[Lease | None] = []
        for lease in leases:
            try:
                out.append(self.renew_lease(lease, ttl, now))
            except StaleEpoch:
                out.append(None)
        return out

    @abc.abstractmethod
    def release_lease(self, lease: Lease) -> None:
        """Give the lease up if it is still held at its epoch; otherwise do nothing."""

    @abc.abstractmethod
    def delete_agent(self, agent_id: str, now: float) -> None:
        """Remove the agent's rows in one transaction (:mod:`stead.store.deletion`):
        :class:`~stead.errors.NotFound` if there is none, :class:`~stead.errors.
        LeaseHeld` while anyone holds its lease live. Its content in the blob store
        is collected separately, once nothing refers to it."""

    @abc.abstractmethod
    def get_lease(self, agent_id: str) -> Lease | None:
        """The agent's lease row, live or expired, or None if it never had one."""

    # -- secrets ----------------------------------------------------------------
    # Sealed (encrypted) values only: the vault (stead.sandbox.secrets) encrypts
    # before it calls these and decrypts after, so no backend sees plain text.
    # ``agent_id`` is "" for a secret scoped to the whole tenant.

    @abc.abstractmethod
    def put_secret(self, tenant: str, agent_id: str, name: str, sealed: str, at: float) -> None:
        """Create or replace one sealed secret."""

    @abc.abstractmethod
    def get_secret(self, tenant: str, agent_id: str, name: str) -> str | None:
        """One sealed secret, or None."""

    @abc.abstractmethod
    def list_secrets(self, tenant: str) -> list[tuple[str, str, float]]:
        """(agent_id, name, updated_at) of the tenant's secrets, sorted; no values."""

    @abc.abstractmethod
    def delete_secret(self, tenant: str, agent_id: str, name: str) -> bool:
        """Remove one secret; False if there was none."""

    # -- policies ---------------------------------------------------------------
    # A tenant's policy text, versioned: setting one adds version N+1. Version 0
    # means no policy has been set.

    @abc.abstractmethod
    def put_policy(self, tenant: str, text: str, by: str, at: float) -> int:
        """Store ``text`` as the tenant's next policy version; return that version."""

    @abc.abstractmethod
    def get_policy(self, tenant: str, version: int | None = None) -> PolicyRecord | None:
        """The tenant's policy at ``version`` (default: the newest), or None."""

    def policy_version(self, tenant: str) -> int:
        """The tenant's newest policy version (0: none), without its text.

        Asked before every tool call; backends make it cheaper than get_policy.
        """
        record = self.get_policy(tenant)
        return 0 if record is None else record.version

    # -- signals ------------------------------------------------------------------
    # Requests for an agent that a person cannot append while a worker holds its
    # lease (a quarantine): the worker reads them before each step, journals what
    # they ask, and drops them once that is committed.

    @abc.abstractmethod
    def post_signal(self, agent_id: str, signal_id: str, data: dict[str, Any], at: float) -> None:
        """Leave a request for the agent's worker."""

    @abc.abstractmethod
    def signals(self, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(signal id, data) of the agent's waiting requests, oldest first."""

    @abc.abstractmethod
    def drop_signals(self, agent_id: str, signal_ids: Sequence[str]) -> None:
        """Forget requests that have been journaled."""

    # -- hibernation ------------------------------------------------------------
    # Snapshot rows are written by the backends' ``_write`` from the events it
    # stores: a ``hibernated`` event inserts one (see :func:`snapshot_made`) and a
    # ``restored`` event marks it consumed, refusing the whole write with
    # :class:`~stead.errors.SnapshotConsumed` if it already was.

    @abc.abstractmethod
    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord:
        """One snapshot, or :class:`~stead.errors.NotFound`."""

    @abc.abstractmethod
    def list_snapshots(self, agent_id: str) -> list[SnapshotRecord]:
        """The agent's snapshots, oldest first."""

    @abc.abstractmethod
    def agents_to_run(self, now: float, tenant: str | None = None) -> list[str]:
        """Agents with work: runnable ones, and waiting or hibernated ones whose timer is due.

        Backends answer from an index, so that a store of many idle agents
        costs a worker nothing per idle agent.
        """

    @abc.abstractmethod
    def idle_agents(self, before: float, tenant: str | None = None) -> list[str]:
        """Agents that wait (:data:`IDLE_STATUSES`, not hibernated) and last changed
        at or before ``before``: the ones a worker may hibernate."""

    def claim(
        self, owner: str, ttl: float, now: float, limit: int, tenant: str | None = None
    ) -> list[Lease] | None:
        """Take the leases of up to ``limit`` agents with work that no live lease holds,
        for ``owner``, at once: workers on many hosts claiming together each get
        different agents. None where the backend does not claim (a worker then
        tries the agents :meth:`agents_to_run` lists, and their leases decide)."""
        return None

    def next_wake(self, tenant: str | None = None) -> float | None:
        """When the earliest timer of a waiting or hibernated agent falls due, if the
        backend can say (None: none is set, or this backend does not tell). A
        worker with nothing to do sleeps until then, or until :meth:`wait_for_work`."""
        return None

    def wait_for_work(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for another process to give an agent work (a
        new agent, a message, an approval, a timer set); True if told of some.

        A backend shared by workers on many hosts tells them (PostgreSQL:
        ``LISTEN``/``NOTIFY``); one that cannot tell anyone just waits, and a
        worker then finds new work at its next look.
        """
        time.sleep(max(0.0, timeout))
        return False

    # -- lifecycle ------------------------------------------------------------

    @abc.abstractmethod
    def history(self) -> list[HistoryEntry]:
        """The migrations applied to this store, oldest first, each with the stead
        version that applied it and when (:mod:`stead.store.history`): a store made
        by a stead that kept it begins at schema version 1."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends need it
        """Release connections; the store must not be used afterwards."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
