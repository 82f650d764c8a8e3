"""A person cancels an agent that a worker in another process is running, in the
middle of a command in its sandbox: the cancel is journaled at once, the worker's
sandbox (the bubblewrap process and the command in it) is killed, the worker
writes nothing more to the agent, and no worker runs it again."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import yaml

from stead.sandbox.bwrap import BwrapSandbox
from tests.waiting import until

from .cli_helpers import Cli


def _sandboxes_of(pid: int) -> set[int]:
    """The bubblewrap processes descended from ``pid``."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        parents[int(entry.name)] = int(rest.split()[1])
        names[int(entry.name)] = name
    found = set()
    for child, name in names.items():
        up = child
        while up in parents and up != pid and up > 1:
            up = parents[up]
        if up == pid and name == "bwrap":
            found.add(child)
    return found


def test_cancelling_an_agent_mid_command_kills_its_sandbox_and_ends_it(
    tmp_path: Path, bwrap: BwrapSandbox
) -> None:
    cli = Cli(tmp_path)
    folder = tmp_path / "spec"
    folder.mkdir()
    script = [{"tool": "shell", "args": {"command": "touch started; sleep 300; touch late"}},
              {"finish": "never"}]  # fmt: skip
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = {"name": "sleeper", "model": "scripted:script.yaml", "tools": ["shell"]}
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    agent_id = "ag_01M90CANCE1TEST0000000000"
    worker = cli.popen("run", str(folder / "spec.yaml"), "--id", agent_id)
    try:
        workspace = cli.workspace(agent_id)
        until(lambda: (workspace / "started").exists())
        sandboxes = until(lambda: _sandboxes_of(worker.pid))

        done = cli.run("cancel", agent_id, "--reason", "wrong task", "--json")
        assert done.returncode == 0, done.stderr
        said = json.loads(done.stdout)
        assert said["status"] == "cancelled" and "wrong task" in said["reason"]

        # the worker's next renewal is refused (within a third of its lease): its
        # sandbox goes, and with it the command
        until(lambda: not any(Path(f"/proc/{p}").exists() for p in sandboxes))
        stdout, stderr = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGKILL)
        worker.communicate()
    # the run that was cut short says why
    assert b"cancelled" in stdout + stderr, (stdout, stderr)
    trace = cli.trace(agent_id)
    cancel = [e for e in trace if e["kind"] == "status_changed"
              and e["data"]["status"] == "cancelled"]  # fmt: skip
    assert len(cancel) == 1 and trace[-1] == cancel[0], [e["kind"] for e in trace]
    assert cancel[0]["data"]["interrupted"], "the call it was in is named"
    assert not (workspace / "late").exists()
    # no worker takes it again
    again = cli.run("work", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["ran"] == {}
    assert cli.show(agent_id)["status"] == "cancelled"
