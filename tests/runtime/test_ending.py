"""Cancel and delete (``Runtime.cancel``, ``Runtime.delete``) on every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from stead import Runtime
from stead.errors import GovernanceError, LeaseHeld, NotFound, UsageError
from stead.sandbox.secrets import new_key
from stead.snapshots import retention
from stead.snapshots.hibernation import hibernate

from .conftest import make_agent

WRITE = {"tool": "write_file", "args": {"path": "out.txt", "content": "hello"}}


def test_a_cancelled_agent_ends_for_good_and_its_approvals_leave_the_inbox(
    runtime: Runtime, tmp_path: Path
) -> None:
    agent_id = make_agent(runtime, tmp_path, [WRITE, {"finish": "wrote"}],
                          autonomy="act_with_approval")  # fmt: skip
    assert runtime.run(agent_id).state.status == "waiting"
    [(_, approval)] = runtime.pending_approvals()
    with pytest.raises(UsageError, match="say why"):
        runtime.cancel(agent_id, "  ")
    state = runtime.cancel(agent_id, "the task was withdrawn")
    assert state.status == "cancelled"
    assert "the task was withdrawn" in state.status_reason
    assert runtime.person() in state.status_reason
    assert runtime.pending_approvals() == []
    with pytest.raises((NotFound, GovernanceError)):
        runtime.approve(approval["approval_id"], 60)
    assert agent_id not in runtime.store.agents_to_run(runtime.clock.now())
    assert runtime.run(agent_id).steps == 0
    with pytest.raises(UsageError, match="cancelled already"):
        runtime.cancel(agent_id, "again")
    last = list(runtime.store.read_events(agent_id))[-1]
    assert last.data["status"] == "cancelled" and last.data["by"] == runtime.person()


def test_a_hibernated_agent_can_be_cancelled(runtime: Runtime, tmp_path: Path) -> None:
    agent_id = make_agent(runtime, tmp_path, [{"wait_for_input": "go?"}, {"finish": "ok"}])
    runtime.run(agent_id)
    hibernate(runtime, agent_id)
    assert runtime.store.load_state(agent_id).status == "hibernated"
    assert runtime.cancel(agent_id, "not needed").status == "cancelled"
    assert runtime.run(agent_id).state.status == "cancelled"


def test_deleting_an_agent_removes_it_and_its_workspace_after_an_export(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEAD_SECRET_KEY", new_key())  # an archive is signed by the agent
    agent_id = make_agent(runtime, tmp_path, [WRITE, {"finish": "wrote"}])
    other = make_agent(runtime, tmp_path, [WRITE, {"finish": "wrote"}])
    runtime.run(agent_id)
    runtime.run(other)
    root = runtime.workspace(agent_id, "default").root
    assert (root / "out.txt").exists()
    archive = tmp_path / "kept.stead"
    done = retention.delete(runtime, agent_id, archive)
    assert done["exported"] == str(archive) and archive.stat().st_size > 0
    assert not root.exists()
    with pytest.raises(NotFound):
        runtime.store.get_record(agent_id)
    assert (runtime.workspace(other, "default").root / "out.txt").exists()
    # the archive brings it back whole
    back = runtime.import_archive(archive)
    assert back.status == "completed"


def test_an_agent_held_by_a_worker_is_not_deleted(runtime: Runtime, tmp_path: Path) -> None:
    agent_id = make_agent(runtime, tmp_path, [{"finish": "ok"}])
    with runtime.hold(agent_id), pytest.raises(LeaseHeld, match="stead cancel"):
        retention.delete(runtime, agent_id)
    assert runtime.store.get_record(agent_id).agent_id == agent_id
    retention.delete(runtime, agent_id)
    with pytest.raises(NotFound):
        retention.delete(runtime, agent_id)
