"""Hibernation: an idle agent costs only storage, and comes back on any worker.

Hibernating an agent that waits (for input, an approval or a timer) freezes
its workspace as a snapshot: the committed manifest, whose files are already
content-addressed, compressed and checksummed blobs. Every blob is verified
before the live folder is removed, and the ``hibernated`` event that records
the snapshot also creates its row in the store, in one transaction.

A snapshot is restored at most once. Restoring it appends a ``restored``
event, and the store marks the snapshot consumed in the same transaction,
refusing the write if it already was. So of any number of restores racing for
one snapshot, exactly one continues the agent; the rest get
:class:`~stead.errors.SnapshotConsumed`. The restored workspace is unpacked
into a staging folder and moved into place only after that commit, so a
refused or damaged restore leaves nothing behind.

Waking is any event that gives a hibernated agent work (see
:func:`stead.state._apply_while_hibernated`): a message, an answered approval,
a timer that fires. The agent's status becomes runnable while its snapshot
stays named in ``state.hibernated``; the next activation, on whichever worker
takes it, restores the snapshot before anything else (:func:`settle_wake`).
Nothing about the activation is in a snapshot: each activation draws fresh
entropy, and secrets stay in the vault.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..canonical import dumps
from ..errors import (
    ArchiveError,
    IntegrityError,
    LeaseHeld,
    NotFound,
    SnapshotConsumed,
    SteadError,
    UsageError,
)
from ..ids import new_id
from ..journal import Kind
from ..sandbox.paths import check_manifest
from ..sandbox.workspace import Manifest, Workspace
from ..state import State
from ..store.base import SnapshotRecord, consumed_message

if TYPE_CHECKING:
    from ..ports import AgentPort, RuntimePort

HIBERNATABLE = ("waiting", "needs_attention")
"""Statuses of an agent that waits for the world; only these are hibernated."""
RESTORE_PATIENCE_SECONDS = 2.0
"""How long a restore waits for a lease held by a short piece of work (a message)."""


def manifest_digest(manifest: Manifest) -> str:
    return hashlib.sha256(dumps(manifest).encode()).hexdigest()


def hibernate(rt: RuntimePort, agent_id: str, reason: str = "requested") -> SnapshotRecord:
    """Freeze the agent's workspace into a snapshot and remove the live folder."""
    with rt.hold(agent_id) as act:
        s = act.state
        if s.status == "hibernated":
            snap = (s.hibernated or {}).get("snapshot_id")
            raise UsageError(f"agent {agent_id} is already hibernated, in snapshot {snap}")
        if s.hibernated is not None:
            # woken, but its next run has not restored it yet: its workspace is still
            # only that snapshot, which must be restored before a new one is made
            raise UsageError(
                f"agent {agent_id} was woken and its snapshot {s.hibernated['snapshot_id']} "
                f"waits to be restored by its next run; restore it with `stead wake "
                f"{agent_id}` first, then hibernate it again"
            )
        if s.status not in HIBERNATABLE:
            raise UsageError(
                f"agent {agent_id} is {s.status}; only an agent that waits (for input, an "
                "approval, a timer or a person) is hibernated. Let it reach a wait first"
            )
        ws = act.workspace
        if ws.root.exists():
            # the snapshot is the committed manifest; anything else in the folder
            # was never journaled, exactly what recovery would put back
            delta = ws.restore(s.manifest)
            if delta:
                act.emit(
                    Kind.WORKSPACE_RESTORED,
                    paths=delta.paths(),
                    reverted=sorted(delta.changed),
                    recreated=delta.removed,
                    reason="the workspace differed from the last committed manifest",
                )
        raw, stored = _verify_blobs(ws, s.manifest)
        snapshot_id = new_id("snap", rt.clock, act.rng)
        act.emit(
            Kind.HIBERNATED,
            snapshot_id=snapshot_id,
            manifest=s.manifest,
            manifest_digest=manifest_digest(s.manifest),
            files=len(s.manifest),
            bytes=raw,
            stored_bytes=stored,
            reason=reason,
        )
        act.flush()
        # only once the snapshot is committed: the live folder is now a cache
        shutil.rmtree(ws.root, ignore_errors=True)
        return rt.store.get_snapshot(snapshot_id)


def _verify_blobs(ws: Workspace, manifest: Manifest) -> tuple[int, int]:
    """Check every blob the manifest names; return (content bytes, stored bytes).

    Run before the live folder goes, so a missing or damaged blob refuses the
    hibernation while the files still exist.
    """
    raw = stored = 0
    for digest in sorted(set(manifest.values())):
        try:
            raw += len(ws.blobs.get(digest))
        except (NotFound, IntegrityError) as exc:
            raise IntegrityError(
                f"cannot hibernate: {exc}. The live workspace was kept; `stead audit verify` "
                "checks the agent's journal"
            ) from exc
        stored += ws.blobs.stored_size(digest)
    return raw, stored


def restore(rt: RuntimePort, snapshot_id: str) -> State:
    """Restore a snapshot explicitly, as a wake event would; it can never be restored again."""
    snap = rt.store.get_snapshot(snapshot_id)
    if snap.consumed:
        raise SnapshotConsumed(consumed_message(snapshot_id, snap.consumed_at, snap.consumed_by))
    deadline = time.monotonic() + RESTORE_PATIENCE_SECONDS
    while True:
        try:
            with rt.hold(snap.agent_id) as act:
                h = act.state.hibernated
                if h is None or h["snapshot_id"] != snapshot_id:
                    again = rt.store.get_snapshot(snapshot_id)
                    if act.state.status == "moved":
                        raise UsageError(
                            f"agent {snap.agent_id} was moved out of this store "
                            f"({act.state.status_reason}); its snapshots are not restored "
                            "here: import the archive where it should run"
                        )
                    if again.consumed:
                        raise SnapshotConsumed(
                            consumed_message(snapshot_id, again.consumed_at, again.consumed_by)
                        )
                    raise SnapshotConsumed(
                        f"snapshot {snapshot_id} is not agent {snap.agent_id}'s current "
                        "snapshot (a later one replaced it); `stead snapshots "
                        f"{snap.agent_id}` lists them"
                    )
                unpack(act, snap)
                fire_due_timer(act)  # restored to wait for a time already past: it is due
                return act.state
        except LeaseHeld as exc:
            again = rt.store.get_snapshot(snapshot_id)
            if again.consumed:
                raise SnapshotConsumed(
                    consumed_message(snapshot_id, again.consumed_at, again.consumed_by)
                ) from None
            if time.monotonic() > deadline:
                raise SnapshotConsumed(
                    f"snapshot {snapshot_id} cannot be restored now: {exc}"
                ) from None
            time.sleep(0.05)


def wake(rt: RuntimePort, agent_id: str) -> State:
    """Restore the agent's current snapshot (``stead wake``)."""
    state = rt.store.load_state(agent_id)
    if state.hibernated is None:
        raise UsageError(f"agent {agent_id} is {state.status}, not hibernated; nothing to wake")
    return restore(rt, state.hibernated["snapshot_id"])


def refuse_while_hibernated(state: State, what: str) -> None:
    """Work on an agent's workspace needs it awake: say so rather than rebuild it piecemeal."""
    if state.hibernated is not None:
        raise UsageError(
            f"agent {state.agent_id} is hibernated (snapshot {state.hibernated['snapshot_id']}); "
            f"wake it first with `stead wake {state.agent_id}`, then {what}"
        )


def settle_wake(act: AgentPort) -> None:
    """At the start of an activation: fire a due timer, restore a woken agent's snapshot."""
    fire_due_timer(act)
    s = act.state
    if s.hibernated is not None and s.status != "hibernated":
        unpack(act, act.store.get_snapshot(s.hibernated["snapshot_id"]))


def fire_due_timer(act: AgentPort) -> None:
    """Commit ``timer_fired`` if the agent's timer is due (under its lease: once)."""
    timer = act.state.timer
    if timer is not None and timer["due_at"] <= act.clock.now():
        act.emit(Kind.TIMER_FIRED, timer_id=timer["timer_id"], due_at=timer["due_at"])
        act.flush()


def unpack(act: AgentPort, snap: SnapshotRecord) -> None:
    """Rebuild the workspace from ``snap``, consume it, and only then move it into place."""
    # the snapshot row is read from the store, which may have been edited: every
    # path must stay inside the workspace (checked again where each file is written)
    check_manifest(snap.manifest, f"snapshot {snap.snapshot_id} (not restored, unchanged)")
    if manifest_digest(snap.manifest) != snap.manifest_digest:
        raise ArchiveError(
            f"snapshot {snap.snapshot_id} is damaged: its manifest does not match its "
            f"checksum {snap.manifest_digest[:16]}…; it was not restored and is unchanged"
        )
    if snap.manifest != act.state.manifest:
        raise ArchiveError(
            f"snapshot {snap.snapshot_id} does not hold the workspace agent "
            f"{snap.agent_id}'s journal names; it was not restored and is unchanged"
        )
    live = act.workspace.root
    staging = Workspace(live.with_name(f".restore-{snap.snapshot_id}"), act.workspace.blobs)
    shutil.rmtree(staging.root, ignore_errors=True)
    try:
        try:
            staging.restore(snap.manifest)  # every blob is checked against its hash
        except (NotFound, IntegrityError) as exc:
            raise ArchiveError(
                f"snapshot {snap.snapshot_id} cannot be restored: {exc}; it was not "
                "consumed, and the store is unchanged"
            ) from exc
        act.emit(Kind.RESTORED, snapshot_id=snap.snapshot_id, by=act.owner)
        act.flush()  # consumes the snapshot, or refuses: SnapshotConsumed
        act.workspace.take_over(staging)
    finally:
        shutil.rmtree(staging.root, ignore_errors=True)


def hibernate_idle(
    rt: RuntimePort, idle_for: float, tenant: str | None, stopping: Callable[[], bool]
) -> tuple[list[str], dict[str, str]]:
    """Hibernate the agents that have waited longer than ``idle_for`` seconds (a
    worker's end of pass); the ones hibernated, and why others could not be."""
    slept: list[str] = []
    failed: dict[str, str] = {}
    for agent_id in rt.store.idle_agents(rt.clock.now() - idle_for, tenant):
        if stopping():
            break
        try:
            hibernate(rt, agent_id, reason=f"idle for {idle_for:g}s")
        except LeaseHeld:
            continue  # someone is answering it right now: not idle after all
        except UsageError:
            continue  # not in a state to sleep now (woken, awaiting its restore)
        except SteadError as exc:
            failed[agent_id] = f"could not hibernate: {exc}"
            continue
        slept.append(agent_id)
    return slept, failed
