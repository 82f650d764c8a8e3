"""A worker killed with SIGKILL during an effectful MCP call.

The call's intent was journaled before it was sent, so a resumed agent knows
the call may have acted: it is outcome-unknown (a person decides), or settled
by the user's reconcile hook; it is never sent again. The server, in the
worker's sandbox, dies with the worker.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from stead import Kind, Runtime, load_spec
from stead.sandbox.bwrap import BwrapSandbox
from stead.store.sqlite import SqliteStore

from .cli_helpers import Cli, write_spec
from .mcp_hooks import ASKED

HERE = Path(__file__).resolve().parent
TRANSFERRING = "transferring"  # mcp_slow.py's name while it makes a transfer
SLOW = {"name": "bank", "command": ["python", str(HERE / "mcp_slow.py")], "mounts": [str(HERE)]}


def server_processes(named: str | None = None) -> list[int]:
    """The processes of the slow server (and the sandbox's around it); with ``named``,
    those whose name is that."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and b"mcp_slow.py" in (entry / "cmdline").read_bytes()
                and (named is None or (entry / "comm").read_text().strip() == named)
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def killed_mid_call(tmp_path: Path, server: dict[str, Any]) -> tuple[Cli, str]:
    """Run the agent in a real worker; SIGKILL it while the transfer is being made."""
    cli = Cli(tmp_path)
    script = [{"tool": "bank__transfer", "args": {"amount": 500}}, {"finish": "paid"}]
    path = write_spec(tmp_path / "spec", script, mcp=[server], scope=[{"tool": "*"}])
    rt = Runtime(SqliteStore(cli.db), cli.data_dir)
    agent_id = rt.create(load_spec(path)).agent_id
    rt.close()
    worker = cli.popen("resume", agent_id)
    # killed once the server is inside the call (it names itself so), however long a
    # loaded machine takes to start the worker and the server in its sandbox
    deadline = time.monotonic() + 120
    while not server_processes(named=TRANSFERRING):
        assert worker.poll() is None, worker.communicate()
        if time.monotonic() > deadline:
            pytest.fail("the transfer never reached the server")
        time.sleep(0.05)
    store = SqliteStore(cli.db)
    try:  # its intent was journaled before it was sent
        assert store.read_events_of_kinds(agent_id, [Kind.TOOL_INTENT])
    finally:
        store.close()
    worker.send_signal(signal.SIGKILL)
    worker.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while server_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server_processes() == [], "the MCP server outlived its worker"
    return cli, agent_id


def calls(rt: Runtime, agent_id: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent_id) if e.kind == kind]


@pytest.mark.chaos
def test_an_effectful_mcp_call_cut_off_by_a_crash_is_outcome_unknown(
    tmp_path: Path, bwrap: BwrapSandbox
) -> None:
    cli, agent_id = killed_mid_call(tmp_path, SLOW)
    rt = Runtime(SqliteStore(cli.db), cli.data_dir, sandbox=bwrap)
    state = rt.run(agent_id).state
    assert state.status == "needs_attention" and list(state.unknown), state.status_reason
    (intent,) = calls(rt, agent_id, Kind.TOOL_INTENT)
    assert intent["tool"] == "bank__transfer" and intent["effect"] == "effectful"
    assert calls(rt, agent_id, Kind.OUTCOME_UNKNOWN)
    assert calls(rt, agent_id, Kind.TOOL_RESULT) == []  # never sent again
    rt.close()


@pytest.mark.chaos
def test_a_reconcile_hook_settles_an_mcp_call_cut_off_by_a_crash(
    tmp_path: Path, bwrap: BwrapSandbox
) -> None:
    hooked = {**SLOW, "reconcile": {"transfer": "tests.chaos.mcp_hooks:transfer_landed"}}
    cli, agent_id = killed_mid_call(tmp_path, hooked)
    ASKED.clear()
    rt = Runtime(SqliteStore(cli.db), cli.data_dir, sandbox=bwrap)
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    assert ASKED == [{"amount": 500}]
    (settled,) = calls(rt, agent_id, Kind.RECONCILED)
    assert settled["verdict"] == "done"
    assert [d for d in calls(rt, agent_id, Kind.TOOL_RESULT) if not d.get("reconciled")] == []
    rt.close()
