"""Agents calling tools of real MCP servers, in their sandbox, under stead's governance.

The servers are the ones from the registries (``mcp-server-time`` and
``mcp-server-git`` from PyPI); the agent is scripted; everything between them
(spec, listing at creation, sandbox, gate, monitors, journal) is real.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.errors import McpServerError, SpecError
from stead.sandbox.bwrap import BwrapSandbox
from stead.store.sqlite import SqliteStore

GIT_ENV = {
    "GIT_AUTHOR_NAME": "stead agent",
    "GIT_AUTHOR_EMAIL": "agent@stead.example",
    "GIT_COMMITTER_NAME": "stead agent",
    "GIT_COMMITTER_EMAIL": "agent@stead.example",
}
TIME = {"name": "time", "command": ["mcp-server-time"]}
GIT = {"name": "git", "command": ["mcp-server-git", "--repository", "/workspace"], "env": GIT_ENV}


def seeded_repo(tmp_path: Path) -> Path:
    seed = tmp_path / "seed"
    seed.mkdir()
    subprocess.run(["git", "init", "-q", str(seed)], check=True)
    (seed / "notes.txt").write_text("first note\n", encoding="utf-8")
    return seed


def make(
    tmp_path: Path, sandbox: Any, script: list[Any], key: bytes | None = None, **spec: Any
) -> tuple[Runtime, str]:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock(),
                 sandbox=sandbox, secret_key=key)  # fmt: skip
    data = {"name": "mcp", "model": "scripted:script.yaml", "scope": [{"tool": "*"}], **spec}
    parsed = parse_spec(data, tmp_path)
    Runtime.check_loads(parsed)
    return rt, rt.create(parsed).agent_id


def events(rt: Runtime, agent_id: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent_id) if e.kind == kind]


def server_processes(name: str) -> list[int]:
    """Live processes whose command line names ``name`` (zombies too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if name.encode() in cmdline and b"pytest" not in cmdline:
            found.append(int(entry.name))
    return found


def test_an_agent_reads_the_time_and_commits_through_git_in_its_sandbox(
    tmp_path: Path, bwrap: BwrapSandbox
) -> None:
    script = [
        {"tool": "time__get_current_time", "args": {"timezone": "UTC"}},
        {"tool": "git__git_status", "args": {"repo_path": "/workspace"}},
        {"tool": "git__git_add", "args": {"repo_path": "/workspace", "files": ["notes.txt"]}},
        {"tool": "git__git_commit", "args": {"repo_path": "/workspace", "message": "add notes"}},
        {"finish": "committed"},
    ]
    seeded_repo(tmp_path)
    # git_add changes the repository in place (idempotent: a changing call), and the
    # file it names comes from git_status, a read: the spec says that status is the
    # workspace's own data, not a third party's text, or the add would ask
    rt, agent_id = make(tmp_path, bwrap, script, workspace="seed", mcp=[TIME, GIT],
                        monitors={"dataflow": {"trusted": ["git__git_status"]}})  # fmt: skip
    listed = events(rt, agent_id, Kind.MCP_TOOLS_LISTED)
    assert [d["server"] for d in listed] == ["time", "git"]
    assert "git_commit" in [t["name"] for t in listed[1]["tools"]]
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    results = {d["tool"]: d for d in events(rt, agent_id, Kind.TOOL_RESULT)}
    assert all(d["ok"] for d in results.values()), results
    now = results["time__get_current_time"]["output"]
    assert now["structured"]["timezone"] == "UTC"  # structured content kept as JSON
    assert now["content"] == []  # its JSON text repeated it: kept once, as JSON
    assert "committed" in results["git__git_commit"]["output"].lower()
    # the effect classes: the server's hints, as the spec said nothing
    intents = {d["tool"]: d for d in events(rt, agent_id, Kind.TOOL_INTENT)}
    assert intents["git__git_commit"]["effect"] == "effectful"
    assert "git__git_status" not in intents and "time__get_current_time" not in intents
    # the commit is in the agent's workspace, and its manifest took it in
    root = rt.workspace(agent_id, "default").root
    log = subprocess.run(["git", "-C", str(root), "log", "--format=%s %an"], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    assert log.strip() == "add notes stead agent"
    assert any(p.startswith(".git/refs/heads/") for p in state.manifest)
    rt.close()
    assert server_processes("mcp-server-git") == []  # nothing outlives the activation
    assert server_processes("mcp-server-time") == []


def test_the_spec_decides_effect_classes_and_hints_never_lower_them(tmp_path: Path) -> None:
    script = [{"tool": "time__get_current_time", "args": {"timezone": "UTC"}},
              {"finish": "done"}]  # fmt: skip
    time_server = {**TIME, "effects": {"get_current_time": "effectful"}}
    rt, agent_id = make(tmp_path, None, script, mcp=[time_server])
    assert rt.run(agent_id).state.status == "completed"
    (intent,) = events(rt, agent_id, Kind.TOOL_INTENT)  # effectful: journaled before it ran
    assert intent["tool"] == "time__get_current_time" and intent["effect"] == "effectful"
    rt.close()


def test_arguments_that_break_the_tools_schema_are_refused_before_the_call(
    tmp_path: Path,
) -> None:
    script = [{"tool": "time__get_current_time", "args": {"timezone": 7}}, {"finish": "done"}]
    rt, agent_id = make(tmp_path, None, script, mcp=[TIME])
    assert rt.run(agent_id).state.status == "completed"
    (result,) = events(rt, agent_id, Kind.TOOL_RESULT)
    assert not result["ok"] and "timezone" in result["error"]
    rt.close()


def test_a_server_that_cannot_start_stops_the_agent_being_made(tmp_path: Path) -> None:
    with pytest.raises(McpServerError, match="could not be listed"):
        dies = {"name": "nope", "command": ["python", "-c", "import sys; sys.exit(4)"]}
        make(tmp_path, None, [{"finish": "x"}], mcp=[dies])
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock())
    assert rt.store.list_agents() == []  # nothing was stored
    rt.close()


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"name": "Git", "command": ["x"]}, "mcp\\[0\\].name"),
        ({"name": "git"}, "exactly one of command"),
        ({"name": "git", "command": "mcp-server-git"}, "mcp\\[0\\].command"),
        ({"name": "git", "url": "ftp://x"}, "mcp\\[0\\].url"),
        ({"name": "git", "command": ["x"], "effect": "harmless"}, "mcp\\[0\\].effect"),
        (
            {"name": "git", "command": ["x"], "env": {"T": "{secret:T}"}},
            "not in mcp\\[0\\].secrets",
        ),
        ({"name": "git", "command": ["x"], "timeout": 0}, "mcp\\[0\\].timeout"),
        ({"name": "git", "command": ["x"], "surprise": 1}, "mcp\\[0\\].surprise"),
    ],
)
def test_a_bad_mcp_section_is_refused_naming_the_field(
    tmp_path: Path, entry: dict[str, Any], problem: str
) -> None:
    with pytest.raises(SpecError, match=problem):
        parse_spec({"name": "a", "model": "openai:m", "mcp": [entry]}, tmp_path)


def test_stead_mcp_ls_lists_tools_with_their_effect_classes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stead.cli.main import main

    spec = {"name": "a", "model": "openai:m",
            "mcp": [{**TIME, "effect": "effectful"}]}  # fmt: skip
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["mcp", "ls", str(tmp_path / "spec.yaml"), "--store", store, "--json"]) == 0
    found = {t["tool"]: t for t in json.loads(capsys.readouterr().out)}
    now = found["get_current_time"]
    assert now["name"] == "time__get_current_time" and now["effect"] == "effectful"
    assert "read_only" in now["disagreement"]  # the server hints read-only; the spec holds
    assert now["inputSchema"]["required"] == ["timezone"]


def test_a_fork_and_an_imported_copy_are_shown_the_mcp_tools_their_origin_was_shown(
    tmp_path: Path,
) -> None:
    script = [{"wait_for_input": "more?"}, {"finish": "done"}]
    rt, agent_id = make(tmp_path, None, script, key=os.urandom(32), mcp=[TIME])
    rt.run(agent_id)
    shown = set(rt.tools_for(rt.store.get_record(agent_id)))
    assert "time__get_current_time" in shown
    forked = rt.fork(agent_id).agent_id
    assert set(rt.tools_for(rt.store.get_record(forked))) == shown
    archive = tmp_path / "agent.stead"
    rt.export(agent_id, archive)
    imported = rt.import_archive(archive).agent_id
    assert set(rt.tools_for(rt.store.get_record(imported))) == shown
    rt.close()
