"""Sealing what an agent is: its spec, and the columns a store finds and routes it by.

The journal says what an agent did. Its row in the ``agents`` table also says
what it *is*: the spec it runs (its tools and the folder they are imported
from, its model, script, instructions, limits, MCP servers, which secrets its
tools get), the tenant whose view admits it and whose secrets it is given,
and the status a worker picks it by. None of that is an event, so the hash
chain alone does not cover it, and someone who can write the database could
point a tool at Python of their own and have the next ``send`` import it on
the worker host. So:

* the digest of the spec (:func:`~stead.store.anchors.spec_digest`) is in the
  agent's first event (``spec_digest`` of ``agent_created``, ``agent_forked``
  or ``agent_imported``, written by :meth:`~stead.store.base.Store.create_agent`),
  under the hash chain, and in the anchor of every commit (``spec_hash``),
  under the agent's signature when it has a key; once a person upgrades the
  spec (:mod:`stead.upgrades`), the ``spec_upgraded`` event's ``to`` digest takes
  the first event's place: the fold keeps it (``State.spec_digest``), and the
  state row is what the anchor pins, so an upgrade is sealed as firmly as a birth;
* tenant, name and status are fields of the state row, which the anchor's
  ``state_hash`` pins; the columns of the row (and its ``version`` and
  ``wake_at``, written in the same transaction) must equal them;
* every anchor carries the lease epoch of its commit, and a new lease must be
  above it: a lease row set back (or deleted) would hand tools a fencing token
  an earlier activation already used.

:func:`problems` compares all of that; :func:`stead.integrity.anchoring.check_before_run`
calls it before every activation, once the state row itself is trusted, and
:mod:`stead.integrity.audit` reports it (:func:`note`). Nothing a spec names is
imported before: :func:`stead.integrity.loading.sealed_tools` checks first.

An agent made by a stead from before specs were sealed has no digest in its
first event; its spec is pinned by the anchor of its first commit since
(trusted as it was found then), and reported as such.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..journal import Event
from ..state import State
from ..store.anchors import Anchor, spec_digest
from ..store.base import BIRTH_KINDS, AgentRecord, AgentRow, Lease, wake_at


@dataclass(frozen=True, slots=True)
class Sealed:
    """Where the agent's spec is sealed: its first event's digest, and its anchor's."""

    birth_seq: int | None
    birth: str
    """The digest in the agent's first event ("": made before specs were sealed)."""
    anchor_version: int | None
    anchored: str
    """The digest in its last commit's anchor ("": none, or an anchor from before)."""
    upgraded: str = ""
    """The digest its last ``spec_upgraded`` event put in force ("": never upgraded)."""

    @classmethod
    def of(
        cls, events: Iterable[Event], anchor: Anchor | None, state: State | None = None
    ) -> Sealed:
        """From the agent's ledger events (its first event among them), its anchor, and
        its state (trusted by then), whose fold keeps the digest of its last upgrade."""
        first = next((e for e in events if e.kind in BIRTH_KINDS), None)
        birth = "" if first is None else str(first.data.get("spec_digest") or "")
        return cls(
            None if first is None else first.seq,
            birth,
            None if anchor is None else anchor.version,
            "" if anchor is None else anchor.spec_hash,
            "" if state is None else state.spec_digest,
        )


def spec_problem(record: AgentRecord, sealed: Sealed) -> str | None:
    """Why the spec in the agent's row is not the one sealed, or None."""
    have = spec_digest(record.spec)
    first = (
        ("its last spec upgrade (the spec_upgraded events of its journal)", sealed.upgraded)
        if sealed.upgraded
        else (f"its first event (event {sealed.birth_seq})", sealed.birth)
    )
    for where, digest in (
        first,
        (f"the anchor of its last commit (event {sealed.anchor_version})", sealed.anchored),
    ):
        if digest and digest != have:
            return (
                f"its spec (the spec column of its row: tools, base_dir, model, script, "
                f"instructions, limits, MCP servers) has digest {have[:16]}…, but {where} "
                f"seals {digest[:16]}…: the spec was edited outside stead"
            )
    return None


def column_problems(record: AgentRecord, row: AgentRow, state: State) -> list[str]:
    """The columns of the agent's row that are not what its state says."""
    columns = (
        ("tenant", record.tenant, state.tenant),
        ("tenant", row.tenant, state.tenant),
        ("name", record.name, state.name),
        ("name", row.name, state.name),
        ("status", row.status, state.status),
        ("version", row.version, state.version),
        ("wake_at", row.wake_at, wake_at(state)),
    )
    found: list[str] = []
    for column, stored, folded in columns:
        said = f"its {column} column says {stored!r} but its state says {folded!r}"
        if stored != folded and said not in found:
            found.append(said)
    return found


def epoch_problem(epoch: int | None, anchor: Anchor | None) -> str | None:
    """Why a lease taken at ``epoch`` would reuse a fencing epoch already used."""
    if epoch is None or anchor is None or epoch > anchor.epoch:
        return None
    return (
        f"a lease taken now is at epoch {epoch}, but its last commit was written under "
        f"epoch {anchor.epoch}: its lease row was set back or deleted outside stead, and "
        "its tools would be given a fencing epoch an earlier run already used"
    )


def problems(
    record: AgentRecord,
    row: AgentRow,
    state: State,
    sealed: Sealed,
    anchor: Anchor | None,
    epoch: int | None,
) -> list[str]:
    """Everything about the agent's row, spec and lease epoch that is not as sealed."""
    found = [p for p in (spec_problem(record, sealed),) if p is not None]
    found += column_problems(record, row, state)
    found += [p for p in (epoch_problem(epoch, anchor),) if p is not None]
    return found


def next_epoch(lease: Lease | None) -> int:
    """The epoch the agent's next lease would take: what an audit compares with the
    anchor's (every acquisition raises the stored epoch by one; none stored is 0)."""
    return (0 if lease is None else lease.epoch) + 1


def note(sealed: Sealed) -> str:
    """What an audit says about the seal on an agent's spec and columns."""
    columns = "its tenant, name, status, version and wake_at columns match its state"
    if sealed.upgraded:
        return f"spec sealed by its last upgrade (digest {sealed.upgraded[:16]}…); {columns}"
    if sealed.birth:
        where = f"event {sealed.birth_seq}"
        if sealed.anchored:
            where += f" and the anchor of event {sealed.anchor_version}"
        return f"spec sealed (digest {sealed.birth[:16]}… in {where}); {columns}"
    if sealed.anchored:
        return (
            f"spec pinned by its anchor (digest {sealed.anchored[:16]}…, event "
            f"{sealed.anchor_version}) as it was found at its first run by a stead that seals "
            f"specs; not sealed in its journal, which an older stead wrote; {columns}"
        )
    return (
        "spec not sealed: made by a stead that did not seal specs, and not run since (its "
        f"next commit pins the spec as it is then); {columns}"
    )
