"""New agents from old ones: forks, and agents imported from an archive.

Both are new identities. A fork or an import gets a new id, a new signing key
(if its origin had one), fresh entropy in every activation, and a workspace of
its own, rebuilt from the origin's manifest. Its journal starts with one event
naming its origin (``agent_forked`` or ``agent_imported``) that carries what
the agent knew and was doing (:data:`stead.folds.CARRIED`): memory, goals,
recent calls, status. It never carries authority: approvals are never copied,
and grants only when asked for, a fork's as delegations from the origin's live
grants (which can only narrow, and die with their source), an import's as new
grants recorded by the person importing.

``export --move`` makes an archive a transfer: the source is marked ``moved``
(a final status) under its lease once the archive is durable, and an archive
imports into a store at most once (the new id is derived from the archive id).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..canonical import dumps
from ..errors import GovernanceError, NotFound, StoreError, UsageError
from ..folds import CARRIED
from ..governance.grants import inactive_reason, narrower
from ..governance.identity import IDENTITY_SECRET
from ..hostpaths import check_import_folder
from ..ids import new_id
from ..integrity.anchoring import check_record
from ..integrity.keys import create_keyed
from ..journal import Event, Kind, NewEvent
from ..sandbox.workspace import Manifest, Workspace
from ..snapshots.archive import Archive, partial_path, read_archive, write_archive
from ..snapshots.trust import TrustedKeys
from ..state import State
from ..store.base import AgentRecord

if TYPE_CHECKING:
    from ..ports import RuntimePort

Vet = Callable[[dict[str, Any]], dict[str, Any]] | None
"""What an import asks of an archive's spec (the one it stores), beyond the archive's
own checks: the server's network-spec allowlist, for an archive sent over HTTP."""


def carried(state: State) -> dict[str, Any]:
    """What a new agent takes over from ``state`` (never its identity or authority)."""
    out = {name: getattr(state, name) for name in CARRIED}
    # a call's "seq" points into the origin's journal, not the new one's: provenance
    # must never draw an edge to an unrelated event of the new journal
    out["recent_calls"] = [{k: v for k, v in c.items() if k != "seq"} for c in state.recent_calls]
    if state.status == "hibernated" and state.hibernated is not None:
        out["status"] = state.hibernated.get("status", "waiting")
        out["status_reason"] = state.hibernated.get("status_reason", "")
    return out


def _exportable(state: State, agent_id: str) -> None:
    """An agent is exported whole, between steps, with nothing a person must settle."""
    if state.unknown:
        calls = ", ".join(sorted(state.unknown))
        raise UsageError(
            f"agent {agent_id} has calls whose outcome is unknown ({calls}); settle them "
            f"first with `stead resolve {agent_id} CALL --as done|retry|abort`, then export"
        )
    asked = [a["approval_id"] for a in state.approvals.values() if a["status"] == "requested"]
    if asked:
        raise UsageError(
            f"agent {agent_id} waits, in the middle of a step, for approval "
            f"{', '.join(asked)}; answer it (`stead approve` or `stead deny`) and export "
            "once the agent has gone on to its next wait or stop"
        )
    if state.inflight is not None or state.pending:
        raise UsageError(
            f"agent {agent_id} is in the middle of a step; export it when it waits or has "
            f"stopped between steps (`stead show {agent_id}`)"
        )


def _at_step_boundary(state: State, agent_id: str, version: int) -> None:
    if state.inflight is not None or state.pending or state.unknown:
        raise UsageError(
            f"version {version} of agent {agent_id} is in the middle of a step (a decision "
            "whose actions are not all done, or a call without a result); fork at a "
            "step boundary: the version of a step_completed event (`stead trace "
            f"{agent_id}` lists them)"
        )


def fork(
    rt: RuntimePort,
    agent_id: str,
    *,
    at_version: int | None = None,
    with_grants: bool = False,
    name: str | None = None,
) -> State:
    """A new agent from the agent's state at ``at_version`` (default: now)."""
    record = rt.store.get_record(agent_id)
    check_record(rt.store, record, rt.vault)  # its spec is copied: the sealed one only
    latest = rt.store.load_state(agent_id)
    version = latest.version if at_version is None else at_version
    source = rt.store.state_at(agent_id, version)
    _at_step_boundary(source, agent_id, version)
    fork_id = new_id("ag", rt.clock)
    origin = {
        "kind": "fork",
        "agent_id": agent_id,
        "version": version,
        "head_hash": source.head_hash,
    }
    born = NewEvent(
        Kind.AGENT_FORKED,
        {
            "tenant": record.tenant,
            "name": name or record.name,
            "state": carried(source),
            "origin": origin,
            "by": rt.person(),
        },
    )
    # the MCP tools the origin was shown: the fork is shown the same
    listed = rt.store.read_events_of_kinds(agent_id, [Kind.MCP_TOOLS_LISTED])
    extra: list[NewEvent] = _listings(listed, version)
    if with_grants:
        given = _take_for_fork(rt, agent_id, fork_id)
        extra += [NewEvent(Kind.GRANT_ADDED, {"grant": g}) for g in given]
    return _give_birth(
        rt, record, fork_id, name, born, extra, source.manifest, bool(source.public_key)
    )


def _listings(events: Iterable[Event], version: int) -> list[NewEvent]:
    """The latest tool list of each MCP server, as of ``version``, for a new agent's
    journal (what an agent is shown of its servers is journaled, not re-listed)."""
    latest: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.kind == Kind.MCP_TOOLS_LISTED and ev.seq <= version:
            latest[str(ev.data["server"])] = dict(ev.data)
    return [NewEvent(Kind.MCP_TOOLS_LISTED, d) for d in latest.values()]


def _take_for_fork(rt: RuntimePort, agent_id: str, fork_id: str) -> list[dict[str, Any]]:
    """The origin's live grants as delegations to the fork, their counted uses taken
    from the origin's in its journal, all under its lease and from its state now.

    Before the fork exists: a grant never allows more calls in all than it was
    given (if the fork then fails, the uses stay taken: never too many).
    """
    with rt.hold(agent_id) as act:
        if act.state.status == "moved":
            raise UsageError(
                f"agent {agent_id} was moved out; its authority went with it, so a fork "
                "of it gets no grants (fork without --with-grants)"
            )
        given = _delegated(rt, agent_id, act.state.grants, f"fork {fork_id}")
        for g in given:
            if g.get("max_uses"):
                act.emit(
                    Kind.DELEGATED,
                    to=fork_id,
                    ok=True,
                    parent=g["delegated_from"]["grant"],
                    reserved=int(g["max_uses"]),
                    by=rt.person(),
                    detail=f"uses moved to fork {fork_id} with its grant {g['id']}",
                )
        act.flush()
    return given


def _delegated(
    rt: RuntimePort, agent_id: str, grants: Mapping[str, Mapping[str, Any]], to: str
) -> list[dict[str, Any]]:
    """The origin's live grants, as delegations to ``to``: the same or narrower, never wider."""
    now = rt.clock.now()
    out = []
    for gid, g in sorted(grants.items()):
        if inactive_reason(g, now) is not None:
            continue
        child = {k: v for k, v in g.items() if k not in ("id", "uses", "by", "delegated_from")}
        if g.get("max_uses") is not None:
            child["max_uses"] = max(0, int(g["max_uses"]) - int(g.get("uses", 0)))
        child["delegable"] = False
        # the person forking grants it, so the source need not be delegable; the
        # copy must still be no wider than its source
        wider = narrower(child, {**g, "delegable": True})
        if wider is not None:  # cannot happen for a copy; refuse rather than widen
            raise GovernanceError(f"grant {gid} cannot be delegated to {to}: {wider}")
        out.append(
            {
                **child,
                "id": new_id("gr", rt.clock),
                "by": f"{rt.person()} (fork of {agent_id})",
                "reason": f"delegated from {agent_id}'s grant {gid} when forked",
                "delegated_from": {"agent": agent_id, "grant": gid},
            }
        )
    return out


def _give_birth(
    rt: RuntimePort,
    record: AgentRecord,
    new_agent: str,
    name: str | None,
    born: NewEvent,
    extra: list[NewEvent],
    manifest: Manifest,
    with_identity: bool,
    tenant: str | None = None,
) -> State:
    """Create the agent and its own workspace copy, atomically enough to leave no half."""
    tenant = tenant or record.tenant
    new_record = AgentRecord(new_agent, tenant, name or record.name, record.spec, rt.clock.now())
    ws = rt.workspace(new_agent, tenant)
    staging = Workspace(ws.root.with_name(f".new-{new_agent}"), rt.blobs(tenant))
    shutil.rmtree(staging.root, ignore_errors=True)
    try:
        staging.restore(manifest)
        # a new key pair, never the origin's, in the agent's first transaction
        state = create_keyed(rt, new_record, [born, *extra], required=with_identity)
    except BaseException:
        shutil.rmtree(staging.root, ignore_errors=True)
        raise
    shutil.rmtree(ws.root, ignore_errors=True)
    os.replace(staging.root, ws.root)
    return state


# -- export and import ----------------------------------------------------------


def export(rt: RuntimePort, agent_id: str, path: Path, *, move: bool = False) -> dict[str, Any]:
    """Write the agent's archive to ``path``; with ``move``, retire the source."""
    from ..integrity.keys import ensure_identity

    before = rt.store.load_state(agent_id)
    if before.status == "moved":
        raise UsageError(_moved_message(rt, agent_id))
    _exportable(before, agent_id)  # before anything is written, such as a new key
    ensure_identity(rt, agent_id)  # the archive is signed with the agent's own key
    with rt.hold(agent_id) as act:
        state = act.state
        if state.status == "moved":
            raise UsageError(_moved_message(rt, agent_id))
        _exportable(state, agent_id)
        record = act.record
        private = rt.vault().get(record.tenant, agent_id, IDENTITY_SECRET)
        if private is None or state.public_key is None:
            raise GovernanceError(f"agent {agent_id} has no signing key in the vault")
        archive_id = new_id("arc", rt.clock, act.rng)
        header = {
            "archive_id": archive_id,
            "created_at": rt.clock.now(),
            "exported_by": rt.person(),
            "move": move,
            "agent": {
                "agent_id": agent_id,
                "tenant": record.tenant,
                "name": record.name,
                "spec": record.spec,
                "created_at": record.created_at,
            },
            "head_hash": state.head_hash,
            "public_key": state.public_key,
        }
        blobs = rt.blobs(record.tenant)

        def retire(digest: str) -> None:
            # committed while the archive exists only as .NAME.partial: a crash
            # after this leaves the source moved and the archive complete under
            # that name (the error of a second export says where)
            partial = partial_path(path)
            try:
                read_archive(partial)  # it imports, or the source is not retired
                act.emit(
                    Kind.AGENT_MOVED,
                    archive_id=archive_id,
                    archive_sha256=digest,
                    path=str(path.resolve()),
                    by=rt.person(),
                )
                act.flush()
            except BaseException:
                if not _move_committed(rt, agent_id):
                    partial.unlink(missing_ok=True)
                raise

        digest = write_archive(
            path,
            header,
            rt.store.read_events(agent_id),
            state,
            blobs.get,
            private,
            before_publish=retire if move else None,
        )
        if move:
            shutil.rmtree(act.workspace.root, ignore_errors=True)
        return {
            "archive_id": archive_id,
            "sha256": digest,
            "path": str(path),
            "move": move,
            "public_key": state.public_key,
        }


def _move_committed(rt: RuntimePort, agent_id: str) -> bool:
    """Whether the source is retired after a failed move; when unsure, assume it is
    (the archive is then kept: nothing is lost)."""
    try:
        return rt.store.load_state(agent_id).status == "moved"
    except Exception:
        return True


def _moved_message(rt: RuntimePort, agent_id: str) -> str:
    moves = rt.store.read_events_of_kinds(agent_id, [Kind.AGENT_MOVED])
    moved = moves[-1].data if moves else {}
    where = moved.get("path")
    if not where:
        return f"agent {agent_id} was moved out already; it has nothing to export"
    partial = partial_path(Path(where))
    return (
        f"agent {agent_id} was moved out already, in archive {moved.get('archive_id')} "
        f"written to {where}; if that file is missing, the export was interrupted after "
        f"the move was committed, and the complete archive is {partial}: rename it"
    )


def import_id(archive_id: str) -> str:
    """The id an archive's agent gets in any store: one archive, at most one agent."""
    return "ag_" + hashlib.sha256(archive_id.encode()).hexdigest()[:26]


def import_archive(
    rt: RuntimePort,
    path: Path,
    *,
    with_grants: bool = False,
    tenant: str | None = None,
    trusted: TrustedKeys | None = None,
    vet: Vet = None,
) -> State:
    """Read a verified archive into this store as a new agent (see the module docstring).

    With ``trusted``, an archive signed by a key not on that list is refused
    before anything is written. The key that signed it is recorded in the new
    agent's origin (``signed_by``) either way. With ``vet``, the spec is what
    ``vet`` makes of it (a SpecError refuses it, before anything is written).
    Its folder (``base_dir``) is never a data folder or in one: what its tools
    import would come from where agents write.
    """
    archive = read_archive(path)  # ArchiveError before anything is written
    if trusted is not None:
        trusted.check(path, archive.header["public_key"])
    head = dict(archive.header["agent"])
    if vet is not None:
        head["spec"] = vet(dict(head["spec"]))
    if str(head["spec"].get("base_dir") or ""):
        check_import_folder(str(head["spec"]["base_dir"]), "the archive's spec")
    tenant = tenant or rt.tenant or head["tenant"]
    new_agent = import_id(archive.archive_id)
    try:
        rt.store.get_record(new_agent)
    except NotFound:
        pass
    else:
        raise StoreError(
            f"archive {archive.archive_id} was imported into this store already, as agent "
            f"{new_agent}; an archive is imported once (export again for another copy)"
        )
    blobs = rt.blobs(tenant)
    written = [d for d in archive.blobs if not blobs.has(d)]
    journal = b"".join(_line(e.to_json()) for e in archive.events)
    if not blobs.has(hashlib.sha256(journal).hexdigest()):
        written.append(hashlib.sha256(journal).hexdigest())
    journal_blob = blobs.put(journal)
    for digest in archive.blobs:
        blobs.put(archive.blobs[digest], digest)
    record = AgentRecord(new_agent, tenant, head["name"], head["spec"], head["created_at"])
    origin = {
        "kind": "import",
        "agent_id": head["agent_id"],
        "tenant": head["tenant"],
        "version": archive.state.version,
        "head_hash": archive.header["head_hash"],
        "archive_id": archive.archive_id,
        "move": archive.move,
        "journal_blob": journal_blob,
        "signed_by": archive.header["public_key"],
    }
    born = NewEvent(
        Kind.AGENT_IMPORTED,
        {
            "tenant": tenant,
            "name": head["name"],
            "state": carried(archive.state),
            "origin": origin,
            "by": rt.person(),
        },
    )
    extra = [NewEvent(Kind.GRANT_ADDED, {"grant": g}) for g in _regranted(rt, archive, with_grants)]
    extra += _listings(archive.events, archive.state.version)
    try:
        return _give_birth(
            rt, record, new_agent, None, born, extra, archive.state.manifest, True, tenant
        )
    except BaseException:
        for digest in written:  # nothing partial is left behind
            blobs.forget(digest)
        raise


def _regranted(rt: RuntimePort, archive: Archive, with_grants: bool) -> list[dict[str, Any]]:
    if not with_grants:
        return []
    now = rt.clock.now()
    out = []
    for gid, g in sorted(archive.state.grants.items()):
        if inactive_reason(g, now) is not None or g.get("delegated_from"):
            continue  # a delegation's source is in the other store: it does not travel
        out.append(
            {
                **{k: v for k, v in g.items() if k not in ("uses",)},
                "id": new_id("gr", rt.clock),
                "by": rt.person(),
                "reason": f"carried over from grant {gid} of archive {archive.archive_id}",
                "delegated_from": None,
            }
        )
    return out


def _line(obj: Any) -> bytes:
    return dumps(obj).encode() + b"\n"
