"""How far a host's workspace had got, kept beside it, so that a store put back is seen.

A store put back to an earlier state (a restored backup, rows rolled back) is
a valid journal: its chain verifies and its anchor is signed, so nothing in
the store can tell that it went back. Run as it is, the agent's workspace
would be restored to the older manifest and the steps after it run again,
repeating effects outside the workspace whose record left with the newer
rows. Only something outside the store can remember how far the agent had
got. So the workers of a host keep, for each agent, a small record beside its
workspace folder (``workspaces/TENANT/.heads/AGENT_ID``: outside the folder a
sandbox mounts, so no command can write it) naming the agent (the hash of its
first event, which tells it from an earlier agent that had the same id) and
the version and head hash of the last commit an activation on this host made.

Before an activation restores the workspace or settles an interrupted call
(:func:`check`, the first thing :mod:`stead.runtime.recovery` does):

* no record, one that does not check out, or one of an earlier agent with the
  same id: the agent runs as before, and its commits are recorded from now on;
* the record names a commit the journal holds (the same hash at that
  version): the store is at or past what this host last saw, and a workspace
  that differs from the manifest is a step that died before its commit, which
  is restored, as always;
* the record names a commit the journal does not hold (past its end, or
  another event at that version): the store went back. The agent does not
  run: a ``violation`` of rule ``store_behind`` (verdict ``suspend``) says
  where each stands, which files differ and what a person can do, and the
  agent waits in ``needs_attention``. Nothing is restored and no call is
  settled (a reconcile hook asks the world, too). Putting back the store that
  holds the recorded commit lets it go on; clearing the violation (``stead
  clear``) accepts the older store: the next activation records the journal as
  it is and restores the workspace to it, knowing that what came after may be
  done again.

The record is written once each commit is durable (:meth:`WorkHead.after`
is the activation's ``on_commit``, which ``Activation.flush`` calls after the
store or the group committer returned), and only by an activation that passed
:func:`check`, so a person's input appended to a store that went back never
moves it. It is overwritten in
place, one write of :data:`RECORD_BYTES` that carries its own checksum: a
write to a temporary file and a rename cost hundreds of microseconds a commit
on ext4 (the rename forces the new file's data out), this a few. A write torn
or lost by a power cut leaves a record that fails its checksum or an older
one; either only narrows what is detected (as if there were none, or as of an
earlier commit), and neither names a commit the store does not durably hold.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..journal import Event, Kind
from ..sandbox.workspace import Workspace, diff
from ..state import State
from ..store.base import Store

if TYPE_CHECKING:
    from ..ports import AgentPort

STORE_BEHIND = "store_behind"
"""The rule of the violation that stops an agent whose store went back."""
RECORD_BYTES = 512
"""A record's size on disk: ids are at most 64 characters, so one always fits."""
SHOWN_PATHS = 20
"""Differing paths named in a violation (the state keeps it, and the state is bounded)."""
OnCommit = Callable[[Sequence[Event]], None]
"""An activation's ``on_commit``: called with the events of each commit once it is durable."""


@dataclass(frozen=True, slots=True)
class Position:
    """A commit of one agent: which agent (its first event's hash), and where."""

    agent_id: str
    first: str
    version: int
    head: str

    def check(self) -> str:
        text = f"{self.agent_id}\n{self.first}\n{self.version}\n{self.head}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def record_path(root: Path) -> Path:
    """Where the record of the workspace at ``root`` is kept: beside it, never in it."""
    return root.parent / ".heads" / root.name


def read(path: Path) -> Position | None:
    """The record at ``path``, or None if there is none or it does not check out."""
    try:
        data = json.loads(path.read_bytes())
        pos = Position(
            str(data["agent_id"]), str(data["first"]), int(data["version"]), str(data["head"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pos if data.get("check") == pos.check() else None


class WorkHead:
    """Records each commit of an activation that passed :func:`check`."""

    def __init__(self, path: Path, agent_id: str, first: str) -> None:
        self.path, self.agent_id, self.first = path, agent_id, first

    def after(self, then: OnCommit | None) -> OnCommit:
        """An activation's ``on_commit``: it is called once a commit is durable, with
        the events committed; the last is the new head. Then ``then``'s turn."""

        def recorded(events: Sequence[Event]) -> None:
            if events:
                self.committed(events[-1].seq, events[-1].hash)
            if then is not None:
                then(events)

        return recorded

    def committed(self, version: int, head: str) -> None:
        """Record that the journal is durably at ``version`` with ``head``."""
        pos = Position(self.agent_id, self.first, version, head)
        body = {"agent_id": pos.agent_id, "first": pos.first, "version": pos.version}
        text = json.dumps({**body, "head": pos.head, "check": pos.check()})
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags, 0o600)
        try:  # padded: a shorter record never leaves the end of a longer one
            os.pwrite(fd, text.encode().ljust(RECORD_BYTES), 0)
        finally:
            os.close(fd)


def violation_id(pos: Position) -> str:
    """One id per recorded commit, so a refusal is journaled once and its clearing found."""
    return f"vio_behind_{pos.version}_{pos.head[:16]}"


def check(act: AgentPort) -> WorkHead | None:
    """Before an activation touches the workspace: None if the store went back behind
    what this host committed (the agent is stopped, see above), else the recorder of
    this activation's commits."""
    state, path = act.state, record_path(act.workspace.root)
    pos = read(path)
    first, gone = _standing(act.store, state, pos)
    head = WorkHead(path, state.agent_id, first)
    if pos is None or not gone:
        return head
    vid = violation_id(pos)
    if vid in state.violations:
        return None  # refused before, and no one has answered yet
    if _raised(act.store, state.agent_id, vid):
        return head  # a person cleared it: the journal as it is, recorded at the next commit
    differs = _differs(act.workspace, state)
    shown = ", ".join(differs[:SHOWN_PATHS]) + (" …" if len(differs) > SHOWN_PATHS else "")
    against = f"the manifest of event {state.version}"
    files = (
        f"files that differ from {against}: {shown}"
        if differs
        else f"no file differs from {against}"
    )
    act.emit(
        Kind.VIOLATION,
        violation_id=vid,
        call_id=None,
        rule=STORE_BEHIND,
        verdict="suspend",
        message=f"{gone_back(state, pos)}; {files}. Put back the store that holds event "
        f"{pos.version}; or, to go on from event {state.version} knowing that what came "
        f'after it may be done again, run `stead clear {state.agent_id} {vid} --reason "..."` '
        "(the workspace is then put back to that event's files)",
        events=[],
        workspace_at={"version": pos.version, "head": pos.head},
        differs=differs[:SHOWN_PATHS],
    )
    act.flush()
    return None


def store_behind(store: Store, state: State, workspace: Workspace) -> str | None:
    """Why the store is behind what this host committed (for ``stead audit verify``),
    or None: also once a person has accepted the older store."""
    pos = read(record_path(workspace.root))
    if pos is None or not _standing(store, state, pos)[1]:
        return None
    vid = violation_id(pos)
    if vid not in state.violations and _raised(store, state.agent_id, vid):
        return None  # accepted: its next activation records the journal as it is
    return gone_back(state, pos)


def gone_back(state: State, pos: Position) -> str:
    """What a record ahead of the store means, in words."""
    if pos.version > state.version:
        where = f"its journal ends at event {state.version}"
    else:
        where = f"its event {pos.version} is another one (it went back, and on from there)"
    return (
        f"the store is behind this host's workspace of agent {state.agent_id}: a worker "
        f"here committed event {pos.version} (head {pos.head[:16]}…), but {where}. The "
        "store was put back to an earlier state (a restored backup, or rows rolled back), "
        "so what the agent did after that state is not in its journal, and running it "
        "would do that again"
    )


def _standing(store: Store, state: State, pos: Position | None) -> tuple[str, bool]:
    """The hash of the agent's first event, and whether ``pos`` names a commit of this
    agent that its journal does not hold."""
    mine = pos is not None and pos.agent_id == state.agent_id
    if pos is not None and mine and pos.version <= state.version:
        held = state.head_hash if pos.version == state.version else _hash_at(store, state, pos)
        if held == pos.head:
            return pos.first, False  # the common case: one row read at most
    first = next((e.hash for e in store.read_events(state.agent_id, 1, 1)), "")
    return first, pos is not None and mine and pos.first == first


def _hash_at(store: Store, state: State, pos: Position) -> str | None:
    return next((e.hash for e in store.read_events(state.agent_id, pos.version, pos.version)), None)


def _raised(store: Store, agent_id: str, vid: str) -> bool:
    found = store.read_events_of_kinds(agent_id, [Kind.VIOLATION])
    return any(e.data.get("violation_id") == vid for e in found)


def _differs(workspace: Workspace, state: State) -> list[str]:
    """The paths where the workspace is not the state's manifest (nothing is stored)."""
    return diff(dict(state.manifest), workspace.scan(keep=False)).paths()
