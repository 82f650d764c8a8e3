"""Forks and archives: new identities, a workspace of their own, no authority carried silently."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.errors import NotFound, SteadError, StoreError, UsageError
from stead.governance.identity import IDENTITY_SECRET
from stead.integrity.keys import ensure_identity
from stead.runtime.activation import Activation
from stead.snapshots.archive import partial_path, read_archive
from stead.store.sqlite import SqliteStore
from stead.tools.base import as_tool
from stead.tools.builtin import BUILTINS

from ..governance.agents import TOOLS as GOV_TOOLS
from ..governance.agents import VAULT_KEY, make_agent, runtime_at

SCRIPT: list[Any] = [
    {"tool": "write_file", "args": {"path": "plan/steps.md", "content": "ship it\n" * 50}},
    {"tool": "deploy", "args": {"target": "staging"}},
    {"remember": {"stage": "deployed"}},
    {"wait_for_input": "deploy to prod?"},
    {"tool": "deploy", "args": {"target": "prod"}},
    {"finish": "both deployed"},
]
SCOPE = [
    {"tool": "deploy", "args": {"target": {"one_of": ["staging", "prod"]}}, "max_uses": 5},
    {"tool": "write_file", "args": {"path": {"glob": "plan/*"}}},
]
TOOLS = {**GOV_TOOLS, "write_file": as_tool(BUILTINS["write_file"])}


def waiting_agent(rt: Runtime, tmp_path: Path) -> str:
    agent = make_agent(rt, tmp_path, SCRIPT, scope=SCOPE, tools=[])
    ensure_identity(rt, agent)
    rt.run(agent, tools=TOOLS)
    assert list(rt.store.load_state(agent).manifest) == ["plan/steps.md"]
    return agent


def events(rt: Runtime, agent: str) -> list[Any]:
    return list(rt.store.read_events(agent))


def test_a_fork_is_a_new_identity_with_its_own_workspace_and_no_grants(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = waiting_agent(rt, tmp_path)
    origin = rt.store.load_state(agent)
    fork = rt.fork(agent)
    assert fork.agent_id != agent
    assert fork.public_key is not None and fork.public_key != origin.public_key
    assert fork.grants == {} and fork.approvals == {}
    assert fork.memory == {"stage": "deployed"} and fork.status == "waiting"
    first = events(rt, fork.agent_id)[0]
    assert first.kind == Kind.AGENT_FORKED
    assert first.data["origin"] == {
        "kind": "fork",
        "agent_id": agent,
        "version": origin.version,
        "head_hash": origin.head_hash,
    }
    # its own copy of the workspace: a change in one is not seen in the other
    mine = rt.workspace(fork.agent_id, "default").root
    theirs = rt.workspace(agent, "default").root
    assert (mine / "plan/steps.md").read_text() == (theirs / "plan/steps.md").read_text()
    (mine / "plan/steps.md").write_text("changed in the fork\n")
    assert (theirs / "plan/steps.md").read_text() == "ship it\n" * 50
    # without grants, the fork's next deploy is refused, while the origin's runs
    rt.send(fork.agent_id, "yes")
    rt.run(fork.agent_id, tools=TOOLS)
    (result,) = [e for e in events(rt, fork.agent_id) if e.kind == Kind.TOOL_RESULT]
    assert not result.data["ok"] and "no grant" in result.data["error"]
    decisions = [e for e in events(rt, fork.agent_id) if e.kind == Kind.DECISION]
    assert decisions[0].data["context_events"] == []  # nothing of the origin's journal
    rt.send(agent, "yes")
    assert rt.run(agent, tools=TOOLS).state.status == "completed"


def test_forked_grants_are_delegations_that_die_with_their_source(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = waiting_agent(rt, tmp_path)
    grants = rt.store.load_state(agent).grants
    (gid,) = [g for g, v in grants.items() if v["tool"] == "deploy"]
    grant = grants[gid]
    fork = rt.fork(agent, with_grants=True)
    (child,) = [g for g in fork.grants.values() if g["tool"] == "deploy"]
    assert child["delegated_from"] == {"agent": agent, "grant": gid}
    assert child["max_uses"] == grant["max_uses"] - 1  # the origin used one
    assert child["delegable"] is False and child["id"] != gid
    # the uses left went to the fork: in all, never more calls than the grant had
    assert rt.store.load_state(agent).grants[gid]["uses"] == grant["max_uses"]
    second = rt.fork(agent, with_grants=True)  # nothing of it is left to give
    assert [g for g in second.grants.values() if g["tool"] == "deploy"] == []
    rt.revoke(agent, gid, "no more deploys")
    rt.send(fork.agent_id, "yes")
    rt.run(fork.agent_id, tools=TOOLS)
    (result,) = [e for e in events(rt, fork.agent_id) if e.kind == Kind.TOOL_RESULT]
    assert not result.data["ok"] and "revoked" in result.data["error"]


def test_a_fork_from_a_past_version_and_not_from_the_middle_of_a_step(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = waiting_agent(rt, tmp_path)
    journal = events(rt, agent)
    first_step = next(e.seq for e in journal if e.kind == Kind.STEP_COMPLETED)
    past = rt.fork(agent, at_version=first_step)
    assert past.memory == {} and past.status == "running"
    mid = next(e.seq for e in journal if e.kind == Kind.TOOL_INTENT)
    with pytest.raises(UsageError, match="middle of a step"):
        rt.fork(agent, at_version=mid)


def test_export_and_import_make_a_new_identity_in_another_store(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path / "a", FakeClock())
    agent = waiting_agent(rt, tmp_path / "a")
    origin = rt.store.load_state(agent)
    archive = tmp_path / "agent.stead"
    done = rt.export(agent, archive)
    assert done["move"] is False and archive.exists()

    other = runtime_at(tmp_path / "b", FakeClock())
    imported = other.import_archive(archive)
    assert imported.agent_id != agent
    assert imported.public_key is not None and imported.public_key != origin.public_key
    assert imported.grants == {} and imported.approvals == {}
    assert imported.memory == origin.memory and imported.status == "waiting"
    assert imported.origin is not None and imported.origin["archive_id"] == done["archive_id"]
    ws = other.workspace(imported.agent_id, "default").root
    assert (ws / "plan/steps.md").read_text() == "ship it\n" * 50
    assert imported.manifest == origin.manifest
    with pytest.raises(StoreError, match="imported into this store already"):
        other.import_archive(archive)
    # the copy's source still runs: it was not a move
    rt.send(agent, "yes")
    assert rt.run(agent, tools=TOOLS).state.status == "completed"


def test_a_moved_agent_runs_only_where_it_was_imported(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path / "a", FakeClock())
    agent = waiting_agent(rt, tmp_path / "a")
    archive = tmp_path / "agent.stead"
    rt.export(agent, archive, move=True)
    source = rt.store.load_state(agent)
    assert source.status == "moved" and source.is_final
    assert rt.run(agent, tools=TOOLS).steps == 0
    with pytest.raises(SteadError, match="moved"):
        rt.send(agent, "yes")
    with pytest.raises(UsageError):
        rt.export(agent, tmp_path / "again.stead")
    with pytest.raises(UsageError, match="authority went with it"):
        rt.fork(agent, with_grants=True)

    other = runtime_at(tmp_path / "b", FakeClock())
    moved = other.import_archive(archive, with_grants=True)
    assert len(moved.grants) == 2
    for grant in moved.grants.values():
        assert grant["by"] == "alice@test" and "carried over" in grant["reason"]
    other.send(moved.agent_id, "yes")
    assert other.run(moved.agent_id, tools=TOOLS).state.status == "completed"


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x20
    path.write_bytes(bytes(data))


def test_export_needs_the_agents_key(tmp_path: Path) -> None:
    from stead import Runtime as R
    from stead.store.memory import MemoryStore

    rt = R(MemoryStore(), tmp_path / "data", clock=FakeClock())
    agent = make_agent(rt, tmp_path, [{"wait_for_input": "?"}], tools=[])
    with pytest.raises(SteadError, match="vault key"):
        rt.export(agent, tmp_path / "x.stead")
    assert not (tmp_path / "x.stead").exists()


MOVE_MAIN = Path(__file__).with_name("move_main.py")


@pytest.mark.chaos
def test_a_move_killed_before_its_archive_is_published_leaves_the_archive_beside_it(
    tmp_path: Path,
) -> None:
    """The move is committed while the archive is complete under a temporary name.

    A worker killed at that instant leaves the source retired (it never runs
    twice) and the whole archive at ``.NAME.partial``; the error of a second
    export says so, and that file imports as it is.
    """
    rt = runtime_at(tmp_path / "a", FakeClock())
    agent = waiting_agent(rt, tmp_path / "a")
    rt.close()
    archive = tmp_path / "out" / "agent.stead"
    archive.parent.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            str(MOVE_MAIN),
            str(tmp_path / "a" / "s.db"),
            str(tmp_path / "a" / "data"),
            VAULT_KEY.hex(),
            agent,
            str(archive),
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()

    partial = partial_path(archive)
    assert not archive.exists() and partial.exists()
    rt = runtime_at(tmp_path / "a", FakeClock())
    assert rt.store.load_state(agent).status == "moved"
    assert rt.run(agent, tools=TOOLS).steps == 0
    with pytest.raises(UsageError) as again:
        rt.export(agent, tmp_path / "again.stead", move=True)
    assert str(partial) in str(again.value) and "rename it" in str(again.value)
    assert not (tmp_path / "again.stead").exists()

    partial.rename(archive)
    other = runtime_at(tmp_path / "b", FakeClock())
    moved = other.import_archive(archive)
    assert moved.origin is not None and moved.origin["agent_id"] == agent
    other.send(moved.agent_id, "yes")
    other.run(moved.agent_id, tools=TOOLS)
    # the imported copy is the only one that runs on
    assert other.store.load_state(moved.agent_id).version > moved.version


def test_a_move_whose_commit_fails_publishes_nothing_and_keeps_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = runtime_at(tmp_path / "a", FakeClock())
    agent = waiting_agent(rt, tmp_path / "a")
    before = rt.store.load_state(agent)
    flush = Activation.flush

    def refuse_the_move(self: Activation) -> None:
        if any(e.kind == Kind.AGENT_MOVED for e in self.buffer):
            raise StoreError("the disk is full")
        flush(self)

    monkeypatch.setattr(Activation, "flush", refuse_the_move)
    archive = tmp_path / "agent.stead"
    with pytest.raises(StoreError, match="disk is full"):
        rt.export(agent, archive, move=True)
    monkeypatch.undo()
    assert not archive.exists() and not partial_path(archive).exists()
    after = rt.store.load_state(agent)
    assert after.status == "waiting" and after.version == before.version
    assert (rt.workspace(agent, "default").root / "plan" / "steps.md").exists()
    rt.export(agent, archive, move=True)
    assert archive.exists() and rt.store.load_state(agent).status == "moved"


def test_a_move_interrupted_after_its_commit_keeps_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the move may be committed the archive is never deleted: an interrupt
    that lands after the commit leaves the retired source and the whole archive."""
    rt = runtime_at(tmp_path / "a", FakeClock())
    agent = waiting_agent(rt, tmp_path / "a")
    flush = Activation.flush

    def commit_then_interrupt(self: Activation) -> None:
        moving = any(e.kind == Kind.AGENT_MOVED for e in self.buffer)
        flush(self)
        if moving:
            raise KeyboardInterrupt

    monkeypatch.setattr(Activation, "flush", commit_then_interrupt)
    archive = tmp_path / "agent.stead"
    with pytest.raises(KeyboardInterrupt):
        rt.export(agent, archive, move=True)
    monkeypatch.undo()
    assert rt.store.load_state(agent).status == "moved"
    partial = partial_path(archive)
    assert partial.exists() and not archive.exists()
    read_archive(partial)  # whole, and it verifies


def test_a_tenant_s_own_view_can_fork_and_import_its_agents(tmp_path: Path) -> None:
    """A runtime confined to one tenant forks and imports agents of that tenant,
    identity keys included, and still cannot reach another tenant's."""
    rt = runtime_at(tmp_path / "a", FakeClock())
    agent = waiting_agent(rt, tmp_path / "a")  # tenant "default", with its own key
    rt.export(agent, tmp_path / "agent.stead")
    rt.close()
    view = Runtime(
        SqliteStore(tmp_path / "a" / "s.db"),
        tmp_path / "a" / "data",
        clock=FakeClock(),
        secret_key=VAULT_KEY,
        tenant="default",
    )
    origin_key = view.store.load_state(agent).public_key
    fork = view.fork(agent)
    imported = view.import_archive(tmp_path / "agent.stead")
    for state in (fork, imported):
        assert state.tenant == "default" and state.public_key not in (None, origin_key)
        assert view.vault().get("default", state.agent_id, IDENTITY_SECRET) is not None
    other = Runtime(
        SqliteStore(tmp_path / "a" / "s.db"),
        tmp_path / "a" / "data",
        clock=FakeClock(),
        secret_key=VAULT_KEY,
        tenant="globex",
    )
    with pytest.raises(NotFound):
        other.fork(agent)
    view.close()
    other.close()
