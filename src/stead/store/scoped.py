"""A store seen through one tenant.

Everything above the backend that acts for a tenant holds a :class:`TenantStore`,
not the backend itself. It answers every question about another tenant's
agents, leases and secrets exactly as it answers about agents that do not
exist (:class:`~stead.errors.NotFound`, with the same wording), so holding
tenant A's view neither reaches tenant B's data nor learns that it exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..errors import NotFound, SteadError, StoreError, UsageError
from ..journal import Event
from ..state import State
from .anchors import Anchor
from .base import (
    AgentRecord,
    AgentRow,
    AgentSummary,
    Batch,
    Lease,
    PolicyRecord,
    SnapshotRecord,
    Store,
    no_snapshot_message,
)
from .history import HistoryEntry


def _missing(agent_id: str) -> NotFound:
    return NotFound(f"no agent with id {agent_id}; `stead ls` lists them")


class TenantStore(Store):
    """Delegates to ``inner``, refusing anything outside ``tenant``."""

    def __init__(self, inner: Store, tenant: str) -> None:
        self.inner = inner
        self.tenant = tenant
        self.schema_version = inner.schema_version
        # an agent's tenant never changes, so what was checked stays checked
        self._mine: set[str] = set()
        # ids this view is about to create: only their secrets may be written early
        self._claimed: set[str] = set()

    def _check(self, agent_id: str) -> None:
        if agent_id in self._mine:
            return
        try:
            record = self.inner.get_record(agent_id)
            if record.tenant != self.tenant:
                raise _missing(agent_id)
            # the tenant column admits an agent here, but its journal says whose it is:
            # a row moved to another tenant outside stead is no one's (the audit says so)
            if self.inner.load_state(agent_id).tenant != self.tenant:
                raise _missing(agent_id)
        except NotFound:
            raise _missing(agent_id) from None
        self._mine.add(agent_id)

    def _create(
        self, record: AgentRecord, events: Sequence[Event], state: State, anchor: Anchor, at: float
    ) -> None:
        if record.tenant != self.tenant:
            raise UsageError(
                f"this store view belongs to tenant {self.tenant} and cannot "
                f"create an agent of tenant {record.tenant}"
            )
        self.inner._create(record, events, state, anchor, at)
        self._claimed.discard(record.agent_id)
        self._mine.add(record.agent_id)

    def get_record(self, agent_id: str) -> AgentRecord:
        self._check(agent_id)
        return self.inner.get_record(agent_id)

    def load_state(self, agent_id: str) -> State:
        self._check(agent_id)
        return self.inner.load_state(agent_id)

    def get_row(self, agent_id: str) -> AgentRow:
        self._check(agent_id)
        return self.inner.get_row(agent_id)

    def list_agents(self, tenant: str | None = None) -> list[AgentSummary]:
        if tenant is not None and tenant != self.tenant:
            return []
        return self.inner.list_agents(self.tenant)

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
        self._check(agent_id)
        self.inner._write(
            agent_id,
            events,
            state,
            expected_version=expected_version,
            epoch=epoch,
            at=at,
            anchor=anchor,
        )

    def get_anchor(self, agent_id: str) -> Anchor | None:
        self._check(agent_id)
        return self.inner.get_anchor(agent_id)

    def append_many(self, batches: Sequence[Batch], at: float) -> list[SteadError | None]:
        refused: dict[int, SteadError] = {}
        for i, b in enumerate(batches):
            try:
                self._check(b.events[0].agent_id)
            except NotFound as exc:
                refused[i] = exc
        allowed = [b for i, b in enumerate(batches) if i not in refused]
        results = iter(self.inner.append_many(allowed, at))
        return [refused[i] if i in refused else next(results) for i in range(len(batches))]

    def read_events(
        self, agent_id: str, from_seq: int = 1, to_seq: int | None = None
    ) -> Iterator[Event]:
        self._check(agent_id)
        return self.inner.read_events(agent_id, from_seq, to_seq)

    def acquire_lease(
        self, agent_id: str, owner: str, ttl: float, now: float, *, takeover: str | None = None
    ) -> Lease:
        self._check(agent_id)
        return self.inner.acquire_lease(agent_id, owner, ttl, now, takeover=takeover)

    def renew_lease(self, lease: Lease, ttl: float, now: float) -> Lease:
        self._check(lease.agent_id)
        return self.inner.renew_lease(lease, ttl, now)

    def release_lease(self, lease: Lease) -> None:
        self._check(lease.agent_id)
        self.inner.release_lease(lease)

    def get_lease(self, agent_id: str) -> Lease | None:
        self._check(agent_id)
        return self.inner.get_lease(agent_id)

    def delete_agent(self, agent_id: str, now: float) -> None:
        self._check(agent_id)  # another tenant's agent is not found, as everywhere here
        self.inner.delete_agent(agent_id, now)

    def claim_new(self, agent_id: str) -> None:
        """Let this view write the secrets of an agent it is about to create (its
        identity key, sealed before the agent's first transaction), and nothing
        else of it until it exists. An id already in use is refused."""
        try:
            self.inner.get_record(agent_id)
        except NotFound:
            self._claimed.add(agent_id)
            return
        raise StoreError(f"agent id {agent_id} is already in use; nothing was written")

    def put_secret(self, tenant: str, agent_id: str, name: str, sealed: str, at: float) -> None:
        if tenant != self.tenant:
            raise UsageError(
                f"this store view belongs to tenant {self.tenant}; it cannot "
                f"set secrets of tenant {tenant}"
            )
        if agent_id and agent_id not in self._claimed:
            self._check(agent_id)
        self.inner.put_secret(tenant, agent_id, name, sealed, at)

    def get_secret(self, tenant: str, agent_id: str, name: str) -> str | None:
        if tenant != self.tenant:
            return None
        return self.inner.get_secret(tenant, agent_id, name)

    def list_secrets(self, tenant: str) -> list[tuple[str, str, float]]:
        return self.inner.list_secrets(tenant) if tenant == self.tenant else []

    def delete_secret(self, tenant: str, agent_id: str, name: str) -> bool:
        return tenant == self.tenant and self.inner.delete_secret(tenant, agent_id, name)

    def read_events_of_kinds(self, agent_id: str, kinds: Iterable[str]) -> list[Event]:
        self._check(agent_id)
        return self.inner.read_events_of_kinds(agent_id, kinds)

    def put_policy(self, tenant: str, text: str, by: str, at: float) -> int:
        if tenant != self.tenant:
            raise UsageError(
                f"this store view belongs to tenant {self.tenant}; it cannot "
                f"set the policy of tenant {tenant}"
            )
        return self.inner.put_policy(tenant, text, by, at)

    def policy_version(self, tenant: str) -> int:
        return self.inner.policy_version(tenant) if tenant == self.tenant else 0

    def get_policy(self, tenant: str, version: int | None = None) -> PolicyRecord | None:
        return self.inner.get_policy(tenant, version) if tenant == self.tenant else None

    def post_signal(self, agent_id: str, signal_id: str, data: dict[str, Any], at: float) -> None:
        self._check(agent_id)
        self.inner.post_signal(agent_id, signal_id, data, at)

    def signals(self, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        self._check(agent_id)
        return self.inner.signals(agent_id)

    def drop_signals(self, agent_id: str, signal_ids: Sequence[str]) -> None:
        self._check(agent_id)
        self.inner.drop_signals(agent_id, signal_ids)

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord:
        record = self.inner.get_snapshot(snapshot_id)
        if record.tenant != self.tenant:
            # the same words as for a snapshot that does not exist
            raise NotFound(no_snapshot_message(snapshot_id))
        return record

    def list_snapshots(self, agent_id: str) -> list[SnapshotRecord]:
        self._check(agent_id)
        return self.inner.list_snapshots(agent_id)

    def agents_to_run(self, now: float, tenant: str | None = None) -> list[str]:
        if tenant is not None and tenant != self.tenant:
            return []
        return self.inner.agents_to_run(now, self.tenant)

    def idle_agents(self, before: float, tenant: str | None = None) -> list[str]:
        if tenant is not None and tenant != self.tenant:
            return []
        return self.inner.idle_agents(before, self.tenant)

    def claim(
        self, owner: str, ttl: float, now: float, limit: int, tenant: str | None = None
    ) -> list[Lease] | None:
        if tenant is not None and tenant != self.tenant:
            return []
        return self.inner.claim(owner, ttl, now, limit, self.tenant)

    def next_wake(self, tenant: str | None = None) -> float | None:
        if tenant is not None and tenant != self.tenant:
            return None
        return self.inner.next_wake(self.tenant)

    def wait_for_work(self, timeout: float) -> bool:
        return self.inner.wait_for_work(timeout)

    def history(self) -> list[HistoryEntry]:
        return self.inner.history()

    def close(self) -> None:
        self.inner.close()
