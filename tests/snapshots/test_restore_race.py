"""Eight processes restore one snapshot at once: exactly one continues the agent.

The snapshot is consumed in the same SQLite transaction as the ``restored``
event, so of any number of real processes racing for it, one wins and every
other is told, by name, that the snapshot was already restored (or is being
restored). The agent's work after the restore happens once.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stead import Kind, Runtime
from stead.snapshots.hibernation import hibernate
from stead.store.sqlite import SqliteStore

from ..runtime.conftest import make_agent

REPO = Path(__file__).resolve().parents[2]
MAIN = Path(__file__).with_name("restore_main.py")
CONTENDERS = 8
SCRIPT = [
    {"tool": "write_file", "args": {"path": "notes/a.txt", "content": "alpha\n" * 100}},
    {"wait_for_input": "what next?"},
    {"tool": "read_file", "args": {"path": "notes/a.txt"}},
    {"finish": "done"},
]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    return env


def wait_for(paths: list[Path], procs: list[subprocess.Popen[str]], timeout: float) -> None:
    """Poll until every path exists; fail at once if a process died before."""
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                _, err = proc.communicate()
                pytest.fail(f"a contender exited before the start: {err}")
        assert time.monotonic() < deadline, "the contenders did not get ready in time"
        time.sleep(0.01)


@pytest.mark.chaos
def test_eight_processes_restore_one_snapshot_and_exactly_one_wins(tmp_path: Path) -> None:
    db, data_dir = tmp_path / "db" / "stead.db", tmp_path / "data"
    rt = Runtime(SqliteStore(db), data_dir)
    agent = make_agent(rt, tmp_path, SCRIPT)
    assert rt.run(agent).state.status == "waiting"
    snap = hibernate(rt, agent)
    hibernated_at = rt.store.load_state(agent).version
    rt.close()

    gates = tmp_path / "gates"
    gates.mkdir()
    go = gates / "go"
    ready = [gates / f"ready-{i}" for i in range(CONTENDERS)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(MAIN), str(db), str(data_dir), snap.snapshot_id, str(r), str(go)],
            cwd=tmp_path,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in ready
    ]
    try:
        wait_for(ready, procs, timeout=30)
        go.touch()
        results = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=30)
            assert proc.returncode == 0, stderr
            lines = [line for line in stdout.splitlines() if line.strip()]
            assert len(lines) == 1, (stdout, stderr)
            results.append(json.loads(lines[0]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    winners = [r for r in results if r["restore"] == "ok"]
    losers = [r for r in results if r["restore"] != "ok"]
    assert len(winners) == 1, results
    (winner,) = winners
    assert "after_restore_error" not in winner, winner
    assert winner["status"] == "completed", winner
    assert len(losers) == CONTENDERS - 1
    for loser in losers:
        assert loser["error"] == "SnapshotConsumed", loser
        assert snap.snapshot_id in loser["message"], loser
        assert (
            "was already restored" in loser["message"] or "is being restored" in loser["message"]
        ), loser

    store = SqliteStore(db)
    try:
        events = list(store.read_events(agent))
        after = [e for e in events if e.seq > hibernated_at]
        restored = [e for e in events if e.kind == Kind.RESTORED]
        assert len(restored) == 1
        assert restored[0].data["snapshot_id"] == snap.snapshot_id
        assert after[0].kind == Kind.RESTORED, [e.kind for e in after]
        restored_at = restored[0].seq
        started = [e for e in events if e.kind == Kind.ACTIVATION_STARTED and e.seq > restored_at]
        assert len(started) == 1, [e.kind for e in after]
        reads = [e for e in events if e.kind == Kind.TOOL_RESULT and e.data["tool"] == "read_file"]
        assert len(reads) == 1 and reads[0].seq > restored_at
        assert reads[0].data["ok"] and reads[0].data["output"] == "alpha\n" * 100
        assert [e.data["text"] for e in after if e.kind == Kind.INPUT_RECEIVED] == ["go"]
        assert sum(e.kind == Kind.FINISH_CLAIMED for e in events) == 1

        row = store.get_snapshot(snap.snapshot_id)
        assert row.consumed and row.consumed_at == restored[0].at
        assert row.consumed_by == restored[0].data["by"]
        host, pid, _ = row.consumed_by.split(":")
        assert (host, int(pid)) == (socket.gethostname(), winner["pid"])
        state = store.load_state(agent)
        assert state.status == "completed" and state.hibernated is None
    finally:
        store.close()
    workspace = data_dir / "workspaces" / "default" / agent
    assert (workspace / "notes" / "a.txt").read_text() == "alpha\n" * 100
    assert not list(workspace.parent.glob(".restore-*"))
