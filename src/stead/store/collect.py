"""Collecting blobs that nothing refers to any more (``stead gc``).

A blob is content a workspace, a snapshot or a journal named by its SHA-256.
Blobs are shared by content within a tenant and never rewritten, so deleting an
agent (or a snapshot being consumed) cannot delete its blobs at once: another
agent may name the same content. A collection instead reads everything that
can name a blob, tenant by tenant, and deletes the blobs none of it names.

What can name a blob: every event of every agent's journal (a step's changed
files, a restore, a rollback's target: a rollback may go back to any version,
so every manifest the journal ever held is kept), every agent's state, and
every snapshot row. Any string there shaped like a digest counts, so a hash
that is not a blob only keeps something longer, never loses it.

A blob written moments ago may not be named yet: an activation stores its
files' blobs before the commit that names them, as do hibernation and an
import. So a blob is collected only if it was last stored more than ``grace``
seconds ago (a backend records when; storing a blob again renews it), and the
age is checked again as it is deleted (on PostgreSQL in the same statement).
The collection reads every journal: it is maintenance, not something a step
pays for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .base import Store

GRACE = 24 * 3600.0
"""Seconds a blob is spared after it was last stored, however unreferenced."""

_DIGEST = re.compile(r"[0-9a-f]{64}")


class Sweepable(Protocol):
    """What a tenant's blob store offers a collection."""

    def stored(self) -> Iterator[tuple[str, float]]: ...

    def forget_if_older(self, digest: str, cutoff: float) -> int: ...


class SweepableBackend(Protocol):
    def tenants(self) -> list[str]: ...

    def tenant(self, tenant: str) -> Any: ...


@dataclass(slots=True)
class Collected:
    """What a collection found and removed (or, in a dry run, would remove)."""

    blobs: int = 0
    bytes: int = 0
    kept: int = 0
    by_tenant: dict[str, int] = field(default_factory=dict)


def referenced(store: Store, tenant: str) -> set[str]:
    """Every digest anything of ``tenant``'s names (see the module's docstring)."""
    found: set[str] = set()
    for summary in store.list_agents(tenant):
        agent_id = summary.agent_id
        for event in store.read_events(agent_id):
            found.update(_digests(event.data))
        found.update(_digests(store.load_state(agent_id).to_json()))
        for snap in store.list_snapshots(agent_id):
            found.update(_digests(snap.manifest))
            found.add(snap.manifest_digest)
    return found


def _digests(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if len(value) == 64 and _DIGEST.fullmatch(value):
            yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _digests(key)
            yield from _digests(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _digests(item)


def collect(
    store: Store,
    blobs: SweepableBackend,
    now: float,
    grace: float = GRACE,
    dry_run: bool = False,
    tenants: Iterable[str] | None = None,
) -> Collected:
    """Delete every blob no agent names that was last stored before ``now - grace``."""
    done = Collected()
    cutoff = now - grace
    for tenant in sorted(tenants if tenants is not None else blobs.tenants()):
        named = referenced(store, tenant)
        kept: Sweepable = blobs.tenant(tenant)
        for digest, at in list(kept.stored()):
            if digest in named or at >= cutoff:
                done.kept += 1
                continue
            size = _size(kept, digest) if dry_run else kept.forget_if_older(digest, cutoff)
            if size:
                done.blobs += 1
                done.bytes += size
                done.by_tenant[tenant] = done.by_tenant.get(tenant, 0) + 1
    return done


def _size(blobs: Any, digest: str) -> int:
    return int(blobs.stored_size(digest))
