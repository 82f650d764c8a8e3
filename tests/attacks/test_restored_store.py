"""Boundary: the store's rows put back to an earlier, validly signed state.

Someone who can write the database (or an operator restoring a backup) puts
back an older copy of it. Every row is genuine: the chain verifies and the
anchor is signed, so nothing in the store can tell that it went back. What
must never happen: the agent runs again from the older state and repeats, on
the world outside its workspace, what it had already done after that state
(issue 25, item 4). The workers of a host keep, beside each workspace and out
of every sandbox's reach, the journal position of the last commit they made
(:mod:`stead.integrity.workhead`); an activation that finds the store behind
it refuses to run the agent, which waits in ``needs_attention`` until a person
puts back the matching store or accepts the older one with ``stead clear``.

The ordinary crash, a step that died after a tool wrote a file and before its
commit, still restores the workspace and goes on:
``tests/runtime/test_recovery.py::test_a_half_written_workspace_is_restored``
and the chaos tests with real kills.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import Kind, Runtime, parse_spec
from stead.integrity.audit import audit
from stead.integrity.clearing import cleared
from stead.integrity.workhead import STORE_BEHIND, WorkHead, read, record_path
from stead.store.sqlite import SqliteStore
from stead.tools.base import ToolContext, as_tool, tool
from stead.tools.builtin import BUILTINS
from stead.workers.parked import ParkedWorker
from stead.workers.threaded import Worker
from tests.chaos.cli_helpers import EXIT_COMPLETED, EXIT_FAILED, EXIT_STOPPED, Cli, write_spec

KEY = bytes(range(32))  # the vault key: every agent here has a signed anchor
LEDGER: dict[str, Path] = {}
"""Where :func:`append_line` writes: the world outside the agent's workspace."""


@tool(effect="effectful")
def append_line(line: str, ctx: ToolContext) -> dict[str, str]:
    """An effect outside the workspace that nothing can take back: one ledger line."""
    with LEDGER["path"].open("a", encoding="utf-8") as fh:
        fh.write(f"{line}\n")
    return {"appended": line}


TOOLS = {name: as_tool(f) for name, f in BUILTINS.items()} | {"append_line": as_tool(append_line)}

SCRIPT: list[Any] = [
    {"tool": "write_file", "args": {"path": "a.txt", "content": "one"}},
    {"tool": "append_line", "args": {"line": "first"}},
    # the backup is taken here, after two steps
    {"tool": "write_file", "args": {"path": "b.txt", "content": "two"}},
    {"tool": "append_line", "args": {"line": "second"}},
    {"finish": "done"},
]


class Host:
    """One host: a SQLite store file and the data folder of its workers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "db" / "stead.db"
        self.db.parent.mkdir(parents=True, exist_ok=True)
        self.data = root / "data"
        self.ledger = root / "outside" / "ledger.txt"
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        LEDGER["path"] = self.ledger

    def runtime(self) -> Runtime:
        return Runtime(SqliteStore(self.db), self.data, secret_key=KEY)

    def create(self, agent_id: str = "ag_restored") -> str:
        (self.root / "script.yaml").write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
        spec = {
            "name": "restored",
            "model": "scripted:script.yaml",
            "tools": ["write_file", "read_file", f"{__name__}:append_line"],
        }
        rt = self.runtime()
        try:
            return rt.create(parse_spec(spec, self.root), agent_id).agent_id
        finally:
            rt.close()

    def run(self, agent: str, max_steps: int | None = None) -> Any:
        rt = self.runtime()
        try:
            return rt.run(agent, tools=TOOLS, max_steps=max_steps).state
        finally:
            rt.close()

    def copy_store(self, to: Path) -> None:
        """A consistent copy of the live database (the backup API reads through WAL)."""
        _copy(self.db, to)

    def put_back(self, backup: Path) -> None:
        """Replace the database's content with the backup's, as restoring it would."""
        _copy(backup, self.db)

    def lines(self) -> list[str]:
        return self.ledger.read_text(encoding="utf-8").splitlines()

    def workspace(self, agent: str) -> Path:
        return self.data / "workspaces" / "default" / agent


def _copy(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    yield Host(tmp_path)
    LEDGER.clear()


def ran_on_then_put_back(host: Host) -> str:
    """The attack: back up after two steps, let the agent finish, restore the backup."""
    agent = host.create()
    assert host.run(agent, max_steps=2).status == "running"
    assert host.lines() == ["first"]
    backup = host.root / "backup.db"
    host.copy_store(backup)
    assert host.run(agent).status == "completed"
    assert host.lines() == ["first", "second"]
    host.put_back(backup)
    return agent


def behind_violation(rt: Runtime, agent: str) -> dict[str, Any]:
    (violation,) = [
        dict(e.data)
        for e in rt.store.read_events(agent)
        if e.kind == Kind.VIOLATION and e.data["rule"] == STORE_BEHIND
    ]
    return violation


def test_a_restored_store_is_refused_and_repeats_no_effect(host: Host) -> None:
    agent = ran_on_then_put_back(host)
    state = host.run(agent)
    assert host.lines() == ["first", "second"], "the effect after the backup ran again"
    assert state.status == "needs_attention"
    assert "behind" in state.status_reason
    # the workspace is left as the later commit made it, for a person to look at
    assert (host.workspace(agent) / "b.txt").read_text() == "two"
    rt = host.runtime()
    try:
        violation = behind_violation(rt, agent)
        message = violation["message"]
        assert violation["verdict"] == "suspend"
        assert "b.txt" in violation["differs"] and "b.txt" in message
        assert f"stead clear {agent} {violation['violation_id']}" in message
        assert "put back the store" in message.lower()
        # a second resume neither runs it nor journals the refusal again
        before = rt.store.load_state(agent).version
    finally:
        rt.close()
    assert host.run(agent).status == "needs_attention"
    assert host.lines() == ["first", "second"]
    rt = host.runtime()
    try:
        kinds = [e.kind for e in rt.store.read_events(agent, before + 1)]
        assert Kind.VIOLATION not in kinds and Kind.TOOL_INTENT not in kinds, kinds
    finally:
        rt.close()


@pytest.mark.parametrize("kind", [Worker, ParkedWorker])
def test_a_worker_refuses_a_restored_store(host: Host, kind: type[Worker]) -> None:
    """The record is written by the group commit of either worker, too."""
    agent = host.create()
    host.run(agent, max_steps=2)
    backup = host.root / "backup.db"
    host.copy_store(backup)
    rt = host.runtime()
    try:
        assert kind(rt).run_until_idle().ran == {agent: "completed"}
    finally:
        rt.close()
    host.put_back(backup)
    rt = host.runtime()
    try:
        report = kind(rt).run_until_idle()
        assert report.ran == {agent: "needs_attention"}, report.errors
        assert rt.store.load_state(agent).status_reason.startswith(STORE_BEHIND)
    finally:
        rt.close()
    assert host.lines() == ["first", "second"]


def test_audit_verify_says_the_store_is_behind_the_workspace(host: Host) -> None:
    agent = ran_on_then_put_back(host)
    rt = host.runtime()
    try:
        report = audit(
            rt.store, agent, vault=rt.vault(), workspace=rt.workspace(agent, "default"), now=0.0
        )
    finally:
        rt.close()
    assert not report.ok
    assert "behind" in report.reason and "b.txt" in report.reason, report.reason


def test_putting_back_the_matching_store_lets_it_go_on(host: Host) -> None:
    agent = host.create()
    host.run(agent, max_steps=2)
    old, new = host.root / "old.db", host.root / "new.db"
    host.copy_store(old)
    host.run(agent, max_steps=2)  # b.txt and the second line
    host.copy_store(new)
    host.put_back(old)
    assert host.run(agent).status == "needs_attention"
    host.put_back(new)  # the store that holds what the workspace last saw
    assert host.run(agent).status == "completed"
    assert host.lines() == ["first", "second"]


def test_a_person_can_accept_the_older_store(host: Host) -> None:
    agent = ran_on_then_put_back(host)
    host.run(agent)
    rt = host.runtime()
    try:
        vid = behind_violation(rt, agent)["violation_id"]
        rt.append_as_person(
            agent, lambda s: cleared(s, vid, "operator", "restored on purpose; repeat it")
        )
    finally:
        rt.close()
    state = host.run(agent)
    assert state.status == "completed", state.status_reason
    # accepted knowingly: the workspace went back to the older files, the step ran again
    assert host.lines() == ["first", "second", "second"]
    rt = host.runtime()
    try:
        restored = [e.data for e in rt.store.read_events(agent) if e.kind == "workspace_restored"]
        assert restored and "b.txt" in restored[-1]["paths"]
        report = audit(rt.store, agent, vault=rt.vault(), workspace=rt.workspace(agent, "default"))
        assert report.ok, report.reason
    finally:
        rt.close()
    record = json.loads(record_path(host.workspace(agent)).read_bytes())
    assert record["version"] == state.version  # the record follows the accepted store


def test_a_half_written_step_is_still_restored(host: Host) -> None:
    """What the record must not refuse: a workspace ahead of its last commit only
    because the step that wrote it died before committing."""
    agent = host.create()
    host.run(agent, max_steps=2)
    ws = host.workspace(agent)
    (ws / "a.txt").write_text("scribbled by a dying step")
    (ws / "stray.txt").write_text("never committed")
    assert host.run(agent).status == "completed"
    assert (ws / "a.txt").read_text() == "one" and not (ws / "stray.txt").exists()
    assert host.lines() == ["first", "second"]


def test_a_store_that_went_back_and_on_elsewhere_is_refused(host: Host) -> None:
    """The record names an event the journal holds at that version, but another one:
    the store went back behind it and has gone on since (on a host without it)."""
    agent = host.create()
    host.run(agent, max_steps=2)
    path = record_path(host.workspace(agent))
    first = read(path)
    assert first is not None
    rt = host.runtime()
    try:
        version = rt.store.load_state(agent).version
    finally:
        rt.close()
    WorkHead(path, agent, first.first).committed(version - 1, "0" * 64)
    state = host.run(agent)
    assert state.status == "needs_attention"
    assert f"its event {version - 1} is another one" in state.status_reason
    assert host.lines() == ["first"]


def test_without_the_record_a_restored_store_runs_again(host: Host) -> None:
    """The limit the README states: on a host without the record (another host, or
    this one's record deleted) nothing tells that the store went back."""
    agent = ran_on_then_put_back(host)
    record_path(host.workspace(agent)).unlink()
    assert host.run(agent).status == "completed"
    assert host.lines() == ["first", "second", "second"]


def test_a_record_of_an_earlier_agent_with_the_same_id_is_ignored(host: Host) -> None:
    agent = host.create("ag_again")
    assert host.run(agent).status == "completed"
    for suffix in ("", "-wal", "-shm"):  # a new store; the data folder is kept
        Path(f"{host.db}{suffix}").unlink(missing_ok=True)
    assert host.create("ag_again") == agent
    assert host.run(agent).status == "completed"


def test_the_command_line_refuses_a_restored_store(tmp_path: Path) -> None:
    """The attack as an operator would make it, with the real command line."""
    key = base64.b64encode(KEY).decode()
    cli = Cli(tmp_path, STEAD_SECRET_KEY=key)
    script: list[Any] = [
        {"tool": "write_file", "args": {"path": "a.txt", "content": "one"}},
        {"tool": "append_plain", "args": {"n": 1}},
        {"tool": "write_file", "args": {"path": "b.txt", "content": "two"}},
        {"tool": "append_plain", "args": {"n": 2}},
        {"finish": "done"},
    ]
    spec = write_spec(tmp_path / "agent", script, name="restored")
    agent = "ag_cli"
    proc = cli.run("run", str(spec), "--id", agent, "--max-steps", "2")
    assert proc.returncode == EXIT_STOPPED, proc.stdout + proc.stderr
    backup = tmp_path / "backup.db"
    _copy(cli.db, backup)
    proc = cli.run("resume", agent)
    assert proc.returncode == EXIT_COMPLETED, proc.stdout + proc.stderr
    assert len(cli.ledger_lines()) == 2
    _copy(backup, cli.db)
    proc = cli.run("resume", agent)
    assert proc.returncode == EXIT_STOPPED, proc.stdout + proc.stderr
    assert "behind" in proc.stdout and f"stead clear {agent}" in proc.stdout, proc.stdout
    assert len(cli.ledger_lines()) == 2, "an effect after the backup ran again"
    proc = cli.run("audit", "verify", agent)
    assert proc.returncode == EXIT_FAILED and "behind" in proc.stdout, proc.stdout
