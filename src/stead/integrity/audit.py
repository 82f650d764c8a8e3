"""Auditing one agent: its journal, its stored state, its anchor and its workspace.

Five things must hold, and :func:`audit` reports the first that does not:

1. the hash chain verifies from the first event to the last;
2. the chain ends where the stored state says the agent is (same version, same
   head hash), so deleting the newest events cannot go unnoticed;
3. folding the journal gives exactly the stored state, so an edit to the state
   row (memory, the list of calls awaiting a person…) cannot go unnoticed either;
4. the journal ends where the agent's last commit left it, and, when the agent
   has an identity key, that commit's anchor is signed by it
   (:mod:`stead.integrity.anchoring`), so a journal rewritten and re-hashed
   together with its state row is caught too; an agent without a key is
   reported as not anchored; and its spec is the one its first event and that
   anchor seal, the tenant, name, status, version and wake_at columns of its
   row are what its state says, and its lease row was not set back below the
   epoch of that commit (:mod:`stead.integrity.sealing`);
5. the agent's workspace is what its last committed manifest says (a stale
   worker that wrote after the agent moved on is caught), and the store is not
   behind the last commit a worker on this host recorded beside it (a store
   put back, :mod:`stead.integrity.workhead`), when it is given and no worker
   holds the agent now.

1 to 3 are :func:`~stead.integrity.chaincheck.audit_journal`, which is also
the full check an activation makes of an agent that has no anchor yet.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import IntegrityError
from ..sandbox.secrets import Vault
from ..sandbox.workspace import Workspace, diff
from ..state import State
from ..store.base import BIRTH_KINDS, Store
from .anchoring import signature_valid, vault_key
from .chaincheck import AuditReport, audit_journal
from .sealing import Sealed, next_epoch, note, problems
from .workhead import store_behind


def audit(
    store: Store,
    agent_id: str,
    *,
    vault: Vault | None = None,
    workspace: Workspace | None = None,
    now: float | None = None,
) -> AuditReport:
    """Check journal, state, anchor and (if given) workspace; never raises for bad data.

    With ``vault`` the anchor's signature is checked against the agent's key as
    the vault holds it; without, against the key its journal names (which a
    rewritten journal could name falsely: the report says so). ``now`` tells
    whether a worker holds the agent, in which case its workspace is not compared.
    """
    report = audit_journal(store, agent_id)
    if not report.ok:
        return report
    state = store.load_state(agent_id)
    report = _anchor(store, state, vault, report)
    if report.ok:
        report = _sealed(store, state, report)
    if not report.ok or workspace is None:
        return report
    return _drift(store, state, workspace, now, report)


def _anchor(store: Store, state: State, vault: Vault | None, report: AuditReport) -> AuditReport:
    agent = state.agent_id
    anchor = store.get_anchor(agent)
    if anchor is None:
        if state.public_key is not None:  # a keyed agent is anchored from its creation on
            reason = "the agent has an identity key but no anchor: it was deleted outside stead"
            return replace(report, ok=False, head_hash=None, reason=reason)
        note = "not anchored: made by a stead that did not anchor new agents, and not run since"
        return replace(report, anchor=note)
    if (anchor.version, anchor.head_hash) != (state.version, state.head_hash):
        return replace(
            report,
            ok=False,
            head_hash=None,
            bad_event=min(anchor.version, state.version) + 1,
            reason=f"the journal ends at event {state.version} but the agent's last commit "
            f"left it at event {anchor.version} (head {anchor.head_hash[:16]}…): the journal "
            "was cut, extended or rewritten, with its state row, outside stead",
        )
    source, public = "its journal", state.public_key
    if vault is not None:
        try:
            signer = vault_key(vault, state)
        except IntegrityError as exc:
            return replace(report, ok=False, head_hash=None, reason=str(exc))
        source, public = "the vault", None if signer is None else signer.public_hex
    if public is None:
        note = (
            "not anchored: the agent has no identity key"
            + ("" if vault is not None else " in its journal (no vault key was given)")
            + ", so a journal rewritten and re-hashed together with its state row would "
            "pass this audit"
        )
        return replace(report, anchor=note)
    if not signature_valid(anchor, public):
        what = "is not signed" if not anchor.signed else "has a signature that does not verify"
        return replace(
            report,
            ok=False,
            head_hash=None,
            reason=f"the anchor of its last commit (event {anchor.version}) {what} with the "
            f"agent's identity key from {source}: its journal, state row or anchor was "
            "rewritten outside stead",
        )
    note = f"anchored: its last commit (event {anchor.version}) is signed by its key from {source}"
    if vault is None:
        note += " (without the vault key, a journal rewritten with a new key would also pass)"
    return replace(report, anchored=True, anchor=note)


def _sealed(store: Store, state: State, report: AuditReport) -> AuditReport:
    agent = state.agent_id
    anchor = store.get_anchor(agent)
    sealed = Sealed.of(store.read_events_of_kinds(agent, BIRTH_KINDS), anchor, state)
    record, row, epoch = store.get_record(agent), store.get_row(agent), store.get_lease(agent)
    found = problems(record, row, state, sealed, anchor, next_epoch(epoch))
    if not found:
        return replace(report, spec=note(sealed))
    reason = "; ".join(found) + " (changed outside stead: put the row back from a backup)"
    return replace(report, ok=False, head_hash=None, reason=reason)


def _drift(
    store: Store, state: State, workspace: Workspace, now: float | None, report: AuditReport
) -> AuditReport:
    if state.status == "hibernated" or not workspace.root.is_dir():
        return report  # no live workspace to compare (a snapshot holds it, or not here)
    lease = store.get_lease(state.agent_id)
    if lease is not None and now is not None and lease.live(now):
        return replace(report, anchor=f"{report.anchor}; workspace not compared: it is running")
    delta = diff(dict(state.manifest), workspace.scan())
    behind = store_behind(store, state, workspace)  # the store put back (see .workhead)
    if not delta and behind is None:
        return report
    added = sorted(p for p in delta.changed if p not in state.manifest)
    changed = sorted(p for p in delta.changed if p in state.manifest)
    parts = [
        f"{label} {', '.join(paths)}"
        for label, paths in (("changed", changed), ("added", added), ("removed", delta.removed))
        if paths
    ]
    drift = f"the workspace differs from the last committed manifest (event {state.version})"
    if behind is not None:
        drift = f"{behind}; {drift}: {'; '.join(parts)}" if parts else behind
    else:
        drift += f": {'; '.join(parts)}. Something wrote to it outside a committed step (a "
        drift += "worker that had lost its lease, or a person)"
    return replace(report, ok=False, head_hash=None, drift=tuple(delta.paths()), reason=drift)
