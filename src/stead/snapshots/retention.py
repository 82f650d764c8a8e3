"""Ending what agents leave: deleting one, and retention for finished ones.

A delete removes the agent's rows (:mod:`stead.store.deletion`) and its
workspace folder, after an export if asked; it is refused while anyone holds
the agent's lease (cancel it first). Its content in the blob store is shared
by content with the tenant's other agents, so it goes at the next collection
(:mod:`stead.store.collect`), which :func:`gc` runs after deleting the finished
agents a retention names.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any, Protocol

from ..errors import LeaseHeld
from ..integrity.workhead import record_path
from ..ports import RuntimePort
from ..state import FINAL_STATUSES
from ..store.blob_url import BlobBackend
from ..store.collect import GRACE, collect


class Retiring(RuntimePort, Protocol):
    """What deleting and collecting need of the runtime, beyond any mechanism's."""

    @property
    def blob_backend(self) -> BlobBackend: ...

    def export(self, agent_id: str, path: str | Path, *, move: bool = False) -> dict[str, Any]: ...


def gc(
    rt: Retiring,
    older_than: float | None,
    grace: float = GRACE,
    dry_run: bool = False,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Delete every finished agent (completed, failed, cancelled, moved) whose last
    change is more than ``older_than`` seconds ago (none if None; one held at
    the moment is left for the next time), then collect the blobs nothing
    names (:mod:`stead.store.collect`); with ``dry_run``, only say what would go."""
    gone = []
    if older_than is not None:
        cutoff = rt.clock.now() - older_than
        for summary in rt.store.list_agents(tenant):
            if summary.status in FINAL_STATUSES and summary.updated_at < cutoff:
                with contextlib.suppress(LeaseHeld):
                    if not dry_run:
                        delete(rt, summary.agent_id)
                    gone.append(summary.agent_id)
    done = collect(rt.store, rt.blob_backend, rt.clock.now(), grace, dry_run,
                   tenants=None if tenant is None else [tenant])  # fmt: skip
    return {"agents": gone, "blobs": done.blobs, "bytes": done.bytes, "kept": done.kept,
            "dry_run": dry_run}  # fmt: skip


def delete(rt: Retiring, agent_id: str, export_to: Path | None = None) -> dict[str, Any]:
    """Delete the agent: its rows, then its workspace; with ``export_to``, its
    archive is written there first (and nothing is deleted if that fails)."""
    record = rt.store.get_record(agent_id)
    exported = rt.export(agent_id, export_to) if export_to is not None else None
    rt.store.delete_agent(agent_id, rt.clock.now())
    root = rt.workspace(agent_id, record.tenant).root
    # the rows are gone first: a workspace without them is litter, never an agent
    shutil.rmtree(root, ignore_errors=True)
    record_path(root).unlink(missing_ok=True)
    return {"agent_id": agent_id, "tenant": record.tenant, "name": record.name,
            "exported": exported["path"] if exported else None}  # fmt: skip
