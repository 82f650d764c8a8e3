"""The in-memory reference store.

It is the executable definition of the store contract: simple enough to read
in one sitting, and run through the same conformance suite as every durable
backend. Values go through canonical JSON on the way in and out, so anything a
durable backend could not store fails here too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from ..canonical import dumps, loads
from ..errors import (
    LeaseHeld,
    NotFound,
    SnapshotConsumed,
    StoreError,
)
from ..journal import Event, Kind
from ..notices import notices
from ..state import State
from .anchors import Anchor, state_row
from .base import (
    IDLE_STATUSES,
    RUN_STATUSES,
    AgentRecord,
    AgentRow,
    AgentSummary,
    Lease,
    PolicyRecord,
    SnapshotRecord,
    Store,
    check_write,
    consumed_message,
    lease_held_message,
    no_snapshot_message,
    renewal_refused,
    snapshot_made,
    upgraded_spec,
    wake_at,
)
from .deletion import not_found, refuse_if_held
from .history import HistoryEntry, stead_version
from .memory_rows import InMemoryMemoryRows
from .schedule_rows import MemoryScheduleRows
from .tokens import MemoryTokenRows
from .webhook_rows import MemoryWebhookRows


def _copy(value: Any) -> Any:
    return loads(dumps(value))


class MemoryStore(
    MemoryTokenRows, MemoryWebhookRows, MemoryScheduleRows, InMemoryMemoryRows, Store
):
    """Keeps everything in dictionaries; lost when the process ends."""

    def __init__(self) -> None:
        MemoryTokenRows.__init__(self)
        MemoryWebhookRows.__init__(self)
        MemoryScheduleRows.__init__(self)
        InMemoryMemoryRows.__init__(self)
        self._lock = threading.RLock()
        self._records: dict[str, AgentRecord] = {}
        self._states: dict[str, str] = {}
        self._updated: dict[str, float] = {}
        self._events: dict[str, list[Event]] = {}
        self._leases: dict[str, Lease] = {}
        self._secrets: dict[tuple[str, str, str], tuple[str, float]] = {}
        self._policies: dict[str, list[PolicyRecord]] = {}
        self._signals: dict[str, dict[str, tuple[str, float]]] = {}
        self._snapshots: dict[str, SnapshotRecord] = {}
        self._anchors: dict[str, Anchor] = {}
        # (status, wake_at) of each agent, as an index for the worker's queries
        self._index: dict[str, tuple[str, float | None]] = {}
        # made now by this stead, at the one schema version it has
        self._history = [HistoryEntry(self.schema_version, stead_version(), time.time())]

    def _create(
        self, record: AgentRecord, events: Sequence[Event], state: State, anchor: Anchor, at: float
    ) -> None:
        with self._lock:
            if record.agent_id in self._records:
                raise StoreError(
                    f"an agent with id {record.agent_id} already exists; "
                    "choose another id or omit --id"
                )
            self._records[record.agent_id] = AgentRecord(
                record.agent_id, record.tenant, record.name, _copy(record.spec), record.created_at
            )
            self._events[record.agent_id] = [self._stored(e) for e in events]
            self._states[record.agent_id] = state_row(state, anchor)
            self._anchors[record.agent_id] = anchor
            self._updated[record.agent_id] = at
            self._index[record.agent_id] = (state.status, wake_at(state))

    @staticmethod
    def _stored(ev: Event) -> Event:
        text = dumps(dict(ev.data))
        return Event(
            ev.agent_id, ev.seq, ev.kind, ev.at, loads(text), ev.prev_hash, ev.hash, ev.epoch, text
        )

    def get_record(self, agent_id: str) -> AgentRecord:
        with self._lock:
            try:
                return self._records[agent_id]
            except KeyError:
                raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them") from None

    def load_state(self, agent_id: str) -> State:
        with self._lock:
            try:
                return State.from_json(loads(self._states[agent_id]))
            except KeyError:
                raise NotFound(f"no agent with id {agent_id}; `stead ls` lists them") from None

    def get_row(self, agent_id: str) -> AgentRow:
        with self._lock:
            record = self.get_record(agent_id)
            status, due = self._index[agent_id]
            version = len(self._events[agent_id])
            return AgentRow(agent_id, record.tenant, record.name, status, version, due)

    def list_agents(self, tenant: str | None = None) -> list[AgentSummary]:
        with self._lock:
            out = []
            for agent_id, rec in self._records.items():
                if tenant is not None and rec.tenant != tenant:
                    continue
                st = loads(self._states[agent_id])
                out.append(
                    AgentSummary(
                        agent_id,
                        rec.tenant,
                        rec.name,
                        st["status"],
                        st["version"],
                        self._updated[agent_id],
                    )
                )
            return sorted(out, key=lambda a: a.agent_id)

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
        with self._lock:
            if agent_id not in self._records:
                raise NotFound(f"no agent with id {agent_id}")
            lease = self._leases.get(agent_id)
            current_epoch = lease.epoch if lease else 0
            stored_version = len(self._events[agent_id])
            check_write(agent_id, epoch, current_epoch, expected_version, stored_version)
            snapshots = self._snapshot_changes(events, state.tenant)
            before = self._index[agent_id][0]
            self._events[agent_id].extend(self._stored(e) for e in events)
            self._states[agent_id] = state_row(state, anchor)
            self._updated[agent_id] = at
            self._index[agent_id] = (state.status, wake_at(state))
            self._snapshots.update(snapshots)
            self._anchors[agent_id] = anchor
            if (spec := upgraded_spec(events)) is not None:
                self._records[agent_id] = replace(self._records[agent_id], spec=_copy(spec))
            self._enqueue(state.tenant, notices(events, before, state))

    def get_anchor(self, agent_id: str) -> Anchor | None:
        self.get_record(agent_id)
        with self._lock:
            return self._anchors.get(agent_id)

    def _snapshot_changes(self, events: Sequence[Event], tenant: str) -> dict[str, SnapshotRecord]:
        """The snapshot rows ``events`` make or consume; refuse a second consumption."""
        changes: dict[str, SnapshotRecord] = {}
        for ev in events:
            if ev.kind == Kind.HIBERNATED:
                made = snapshot_made(ev, tenant)
                changes[made.snapshot_id] = made
            elif ev.kind == Kind.RESTORED:
                sid = ev.data["snapshot_id"]
                row = changes.get(sid) or self._snapshots.get(sid)
                if row is None or row.agent_id != ev.agent_id:
                    raise NotFound(no_snapshot_message(sid))
                if row.consumed:
                    raise SnapshotConsumed(consumed_message(sid, row.consumed_at, row.consumed_by))
                changes[sid] = replace(row, consumed_at=ev.at, consumed_by=ev.data["by"])
        return changes

    def get_snapshot(self, snapshot_id: str) -> SnapshotRecord:
        with self._lock:
            try:
                return self._snapshots[snapshot_id]
            except KeyError:
                raise NotFound(no_snapshot_message(snapshot_id)) from None

    def list_snapshots(self, agent_id: str) -> list[SnapshotRecord]:
        self.get_record(agent_id)
        with self._lock:
            rows = [r for r in self._snapshots.values() if r.agent_id == agent_id]
        return sorted(rows, key=lambda r: r.version)

    def agents_to_run(self, now: float, tenant: str | None = None) -> list[str]:
        with self._lock:
            return sorted(
                a
                for a, (status, due) in self._index.items()
                if (tenant is None or self._records[a].tenant == tenant)
                and (
                    status in RUN_STATUSES
                    or (status in ("waiting", "hibernated") and due is not None and due <= now)
                )
            )

    def idle_agents(self, before: float, tenant: str | None = None) -> list[str]:
        with self._lock:
            return sorted(
                a
                for a, (status, _) in self._index.items()
                if status in IDLE_STATUSES
                and self._updated[a] <= before
                and (tenant is None or self._records[a].tenant == tenant)
            )

    def read_events(
        self, agent_id: str, from_seq: int = 1, to_seq: int | None = None
    ) -> Iterator[Event]:
        with self._lock:
            if agent_id not in self._events:
                raise NotFound(f"no agent with id {agent_id}")
            journal = self._events[agent_id]
            end = len(journal) if to_seq is None else min(to_seq, len(journal))
            events = journal[max(from_seq, 1) - 1 : end]  # what was asked, not the whole
        yield from events

    def acquire_lease(
        self, agent_id: str, owner: str, ttl: float, now: float, *, takeover: str | None = None
    ) -> Lease:
        with self._lock:
            if agent_id not in self._records:
                raise NotFound(f"no agent with id {agent_id}")
            cur = self._leases.get(agent_id)
            if cur is not None and cur.live(now) and cur.owner not in (owner, takeover):
                raise LeaseHeld(lease_held_message(cur, now))
            lease = Lease(agent_id, owner, (cur.epoch if cur else 0) + 1, now + ttl)
            self._leases[agent_id] = lease
            return lease

    def renew_lease(self, lease: Lease, ttl: float, now: float) -> Lease:
        with self._lock:
            cur = self._leases.get(lease.agent_id)
            if cur is None or cur.epoch != lease.epoch or cur.owner != lease.owner:
                raise renewal_refused(lease)
            renewed = Lease(lease.agent_id, lease.owner, lease.epoch, now + ttl)
            self._leases[lease.agent_id] = renewed
            return renewed

    def release_lease(self, lease: Lease) -> None:
        with self._lock:
            cur = self._leases.get(lease.agent_id)
            if cur is not None and cur.epoch == lease.epoch:
                self._leases[lease.agent_id] = Lease(lease.agent_id, "", lease.epoch, 0.0)

    def get_lease(self, agent_id: str) -> Lease | None:
        with self._lock:
            return self._leases.get(agent_id)

    def delete_agent(self, agent_id: str, now: float) -> None:
        with self._lock:
            if agent_id not in self._records:
                raise not_found(agent_id)
            refuse_if_held(self._leases.get(agent_id), now)
            for rows in (self._records, self._states, self._updated, self._events,
                         self._leases, self._signals, self._anchors, self._index):  # fmt: skip
                rows.pop(agent_id, None)
            for key in [k for k in self._secrets if k[1] == agent_id]:
                del self._secrets[key]
            for sid in [s for s, r in self._snapshots.items() if r.agent_id == agent_id]:
                del self._snapshots[sid]
            with self._memory_lock:  # its long-term memories; its tenant's shared ones stay
                for mid in [m for m, r in self._memories.items() if r.owner == agent_id]:
                    del self._memories[mid]

    def put_secret(self, tenant: str, agent_id: str, name: str, sealed: str, at: float) -> None:
        with self._lock:
            self._secrets[(tenant, agent_id, name)] = (sealed, at)

    def get_secret(self, tenant: str, agent_id: str, name: str) -> str | None:
        with self._lock:
            found = self._secrets.get((tenant, agent_id, name))
        return None if found is None else found[0]

    def list_secrets(self, tenant: str) -> list[tuple[str, str, float]]:
        with self._lock:
            return sorted((a, n, at) for (t, a, n), (_, at) in self._secrets.items() if t == tenant)

    def delete_secret(self, tenant: str, agent_id: str, name: str) -> bool:
        with self._lock:
            return self._secrets.pop((tenant, agent_id, name), None) is not None

    def put_policy(self, tenant: str, text: str, by: str, at: float) -> int:
        with self._lock:
            versions = self._policies.setdefault(tenant, [])
            versions.append(PolicyRecord(tenant, len(versions) + 1, text, by, at))
            return len(versions)

    def get_policy(self, tenant: str, version: int | None = None) -> PolicyRecord | None:
        with self._lock:
            versions = self._policies.get(tenant, [])
            if not versions:
                return None
            if version is None:
                return versions[-1]
            return versions[version - 1] if 1 <= version <= len(versions) else None

    def post_signal(self, agent_id: str, signal_id: str, data: dict[str, Any], at: float) -> None:
        self.get_record(agent_id)
        with self._lock:
            self._signals.setdefault(agent_id, {})[signal_id] = (dumps(data), at)

    def signals(self, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            waiting = sorted(self._signals.get(agent_id, {}).items(), key=lambda kv: kv[1][1])
        return [(sid, loads(text)) for sid, (text, _) in waiting]

    def drop_signals(self, agent_id: str, signal_ids: Sequence[str]) -> None:
        with self._lock:
            for sid in signal_ids:
                self._signals.get(agent_id, {}).pop(sid, None)

    def history(self) -> list[HistoryEntry]:
        with self._lock:
            return list(self._history)
