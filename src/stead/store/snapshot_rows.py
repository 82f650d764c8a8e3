"""The snapshot row every backend stores for a hibernated agent, and the words of its
refusals; :mod:`stead.store.base` names them for its callers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..journal import Event


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    """A hibernated agent's workspace, frozen: made once, restored at most once.

    The row is written in the same transaction as the agent's ``hibernated``
    event and marked consumed in the same transaction as its ``restored`` event,
    so the journal and the snapshot table can never disagree about it.
    """

    snapshot_id: str
    agent_id: str
    tenant: str
    version: int
    manifest: dict[str, str]
    manifest_digest: str
    files: int
    bytes: int
    stored_bytes: int
    created_at: float
    consumed_at: float | None = None
    consumed_by: str | None = None

    @property
    def consumed(self) -> bool:
        return self.consumed_at is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot_id": self.snapshot_id,
            "agent_id": self.agent_id,
            "tenant": self.tenant,
            "version": self.version,
            "manifest_digest": self.manifest_digest,
            "files": self.files,
            "bytes": self.bytes,
            "stored_bytes": self.stored_bytes,
            "created_at": self.created_at,
            "consumed": self.consumed,
            "consumed_at": self.consumed_at,
            "consumed_by": self.consumed_by,
        }


def snapshot_made(ev: Event, tenant: str) -> SnapshotRecord:
    """The snapshot row a ``hibernated`` event creates (every backend stores the same)."""
    d = ev.data
    return SnapshotRecord(
        snapshot_id=d["snapshot_id"],
        agent_id=ev.agent_id,
        tenant=tenant,
        version=ev.seq,
        manifest=dict(d["manifest"]),
        manifest_digest=d["manifest_digest"],
        files=int(d["files"]),
        bytes=int(d["bytes"]),
        stored_bytes=int(d["stored_bytes"]),
        created_at=ev.at,
    )


def no_snapshot_message(snapshot_id: str) -> str:
    """The one wording of "no such snapshot", also for another agent's or tenant's.

    A snapshot that belongs elsewhere reads exactly like a missing one, so a
    caller learns nothing about what other agents or tenants hold.
    """
    return f"no snapshot {snapshot_id}; `stead snapshots AGENT` lists an agent's"


def consumed_message(snapshot_id: str, at: float | None, by: str | None) -> str:
    """The one wording of "this snapshot cannot be restored (again)"."""
    if at is None:
        return (
            f"snapshot {snapshot_id} is being restored by {by} right now; a snapshot "
            "is restored once, and that restore continues the agent"
        )
    return (
        f"snapshot {snapshot_id} was already restored (by {by}); a snapshot is restored "
        "once, so that ids, entropy and credentials are never used twice. The agent "
        "continues from that restore: see `stead show` and `stead snapshots`"
    )
