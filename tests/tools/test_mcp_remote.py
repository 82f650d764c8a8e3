"""An agent calling a remote MCP server over streamable HTTP, under its network grant.

The server is ``tests/tools/mcp_servers.py`` in its ``http-seen`` mode, on
127.0.0.1 in a subprocess: its ``whoami`` tool answers the Authorization header
it got, and also writes it to a file, so a test knows what reached the server
whatever the journal shows. The header carries a vault secret, which must
reach the server and never the journal or the store's files.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.errors import McpServerError, SecretError
from stead.store.sqlite import SqliteStore
from stead.tools.base import as_tool, tool

REPO = Path(__file__).resolve().parents[2]
TOKEN = "tok-123"
NETWORK_MESSAGE = "is reached over the network, and the agent holds no network grant now"


class Remote:
    """A streamable HTTP server on 127.0.0.1, and the headers its whoami saw."""

    def __init__(self, folder: Path) -> None:
        self.seen_file = folder / "seen.txt"
        listening = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{listening.getsockname()[1]}/mcp"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.tools.mcp_servers", "http-seen",
             str(listening.fileno()), str(self.seen_file)],
            pass_fds=[listening.fileno()],
            cwd=REPO,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        listening.close()  # the server has it; connections wait in its backlog

    def seen(self) -> list[str]:
        if not self.seen_file.exists():
            return []
        return self.seen_file.read_text(encoding="utf-8").splitlines()

    def server(self) -> dict[str, Any]:
        return {
            "name": "docs",
            "url": self.url,
            "headers": {"Authorization": "Bearer {secret:DOCS_TOKEN}"},
            "secrets": ["DOCS_TOKEN"],
            "timeout": 10,
        }


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    server = Remote(tmp_path)
    try:
        yield server
    finally:
        server.proc.kill()
        server.proc.wait()


def runtime(tmp_path: Path, clock: FakeClock, *, secret: bool = True) -> Runtime:
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=clock,
                 secret_key=os.urandom(32))  # fmt: skip
    if secret:
        rt.vault().set("default", "DOCS_TOKEN", TOKEN, to=["127.0.0.1"], at=clock.now())
    return rt


def create(
    rt: Runtime, tmp_path: Path, script: list[Any], scope: list[Any], remote: Remote
) -> str:  # fmt: skip
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {"name": "reader", "model": "scripted:script.yaml", "scope": scope,
            "mcp": [remote.server()]}  # fmt: skip
    spec = parse_spec(data, tmp_path)
    Runtime.check_loads(spec)
    return rt.create(spec).agent_id


def events(rt: Runtime, agent_id: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent_id) if e.kind == kind]


def stored_bytes(tmp_path: Path) -> bytes:
    """Every file the store and the runtime wrote: the database (its WAL too),
    blobs and workspaces."""
    files = [*tmp_path.glob("s.db*"), *(tmp_path / "data").rglob("*")]
    return b"".join(f.read_bytes() for f in files if f.is_file())


NETWORK = {"tool": "network"}
EVERYTHING = {"tool": "*"}


def test_a_remote_call_sends_the_vault_secret_and_the_journal_never_holds_it(
    tmp_path: Path, remote: Remote
) -> None:
    clock = FakeClock()
    rt = runtime(tmp_path, clock)
    script = [{"tool": "docs__whoami", "args": {}},
              {"tool": "docs__echo", "args": {"text": "over HTTP"}},
              {"finish": "done"}]  # fmt: skip
    agent_id = create(rt, tmp_path, script, [EVERYTHING, NETWORK], remote)
    (listed,) = events(rt, agent_id, Kind.MCP_TOOLS_LISTED)  # listed at creation, over HTTP
    assert "whoami" in [t["name"] for t in listed["tools"]]
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    whoami, echo = events(rt, agent_id, Kind.TOOL_RESULT)
    assert whoami["ok"] and echo["ok"] and echo["output"] == "over HTTP"
    assert remote.seen() == [f"Bearer {TOKEN}"]  # the server got the secret...
    assert whoami["output"].startswith("Bearer ") and TOKEN not in whoami["output"]
    assert "DOCS_TOKEN" in whoami["output"]  # ...the journal the secret's name
    journal = [e.data for e in rt.store.read_events(agent_id)]
    assert TOKEN not in repr(journal)
    assert echo["verdict"]["network"]  # the call ran under the network grant
    rt.close()
    assert TOKEN.encode() not in stored_bytes(tmp_path)


def test_without_a_network_grant_at_the_call_the_remote_call_fails(
    tmp_path: Path, remote: Remote
) -> None:
    clock = FakeClock()
    rt = runtime(tmp_path, clock)
    script = [{"tool": "docs__whoami", "args": {}}, {"finish": "done"}]
    agent_id = create(rt, tmp_path, script, [EVERYTHING, NETWORK], remote)
    state = rt.store.load_state(agent_id)
    (grant,) = [g for g in state.grants.values() if g["tool"] == "network"]
    rt.revoke(agent_id, grant["id"], "no more network")
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason  # the agent went on
    (result,) = events(rt, agent_id, Kind.TOOL_RESULT)
    assert result["ok"] is False
    assert "MCP server 'docs' " + NETWORK_MESSAGE in result["error"]
    assert "stead grant" in result["error"]  # says how to get one
    assert remote.seen() == []  # nothing was sent
    rt.close()


def test_a_network_grant_that_has_expired_stops_remote_calls(
    tmp_path: Path, remote: Remote
) -> None:
    clock = FakeClock()
    rt = runtime(tmp_path, clock)
    script = [{"tool": "docs__whoami", "args": {}}, {"finish": "done"}]
    agent_id = create(rt, tmp_path, script, [EVERYTHING, {**NETWORK, "valid_for": 60}], remote)
    clock.advance(61)
    rt.run(agent_id)
    (result,) = events(rt, agent_id, Kind.TOOL_RESULT)
    assert result["ok"] is False and NETWORK_MESSAGE in result["error"]
    assert remote.seen() == []
    rt.close()


def test_a_network_grant_that_expires_mid_activation_stops_remote_calls(
    tmp_path: Path, remote: Remote
) -> None:
    clock = FakeClock()
    rt = runtime(tmp_path, clock)

    @tool(effect="read_only", name="wait")
    def wait(seconds: int) -> str:
        """Let time pass."""
        clock.advance(seconds)
        return "waited"

    script = [{"tool": "docs__whoami", "args": {}},
              {"tool": "wait", "args": {"seconds": 120}},  # the grant expires
              {"tool": "docs__whoami", "args": {}},
              {"finish": "done"}]  # fmt: skip
    agent_id = create(rt, tmp_path, script, [EVERYTHING, {**NETWORK, "valid_for": 60}], remote)
    tools = rt.tools_for(rt.store.get_record(agent_id)) | {"wait": as_tool(wait)}
    state = rt.run(agent_id, tools=tools).state
    assert state.status == "completed", state.status_reason
    before, waited, after = events(rt, agent_id, Kind.TOOL_RESULT)
    assert before["ok"] and waited["ok"]
    rt.close()
    assert after["ok"] is False and NETWORK_MESSAGE in after.get("error", ""), after
    assert remote.seen() == [f"Bearer {TOKEN}"]  # the second call never reached it


def test_an_agent_whose_scope_grants_no_network_cannot_list_a_remote_server(
    tmp_path: Path, remote: Remote
) -> None:
    rt = runtime(tmp_path, FakeClock())
    with pytest.raises(McpServerError) as caught:
        create(rt, tmp_path, [{"finish": "x"}], [EVERYTHING], remote)
    assert "MCP server 'docs' could not be listed, so the agent was not made" in str(caught.value)
    assert NETWORK_MESSAGE in str(caught.value)
    assert rt.store.list_agents() == []
    rt.close()


def test_a_remote_server_whose_secret_is_not_set_stops_the_agent_being_made(
    tmp_path: Path, remote: Remote
) -> None:
    rt = runtime(tmp_path, FakeClock(), secret=False)
    with pytest.raises(SecretError, match="needs secret DOCS_TOKEN, which is not set") as caught:
        create(rt, tmp_path, [{"finish": "x"}], [EVERYTHING, NETWORK], remote)
    assert "stead secret set DOCS_TOKEN" in str(caught.value)
    assert rt.store.list_agents() == []
    rt.close()


def test_a_remote_server_gets_no_secret_that_is_not_bound_to_its_host(
    tmp_path: Path, remote: Remote
) -> None:
    rt = runtime(tmp_path, FakeClock(), secret=False)
    for to in (None, ["docs.example.com"]):  # bound to no host, or to another one
        rt.vault().set("default", "DOCS_TOKEN", TOKEN, to=to, at=1.0)
        with pytest.raises(SecretError, match=r"DOCS_TOKEN may not be sent to '127\.0\.0\.1'"):
            create(rt, tmp_path, [{"finish": "x"}], [EVERYTHING, NETWORK], remote)
    assert rt.store.list_agents() == []
    # bound to it after the agent was made, then narrowed: its calls get nothing
    rt.vault().set("default", "DOCS_TOKEN", TOKEN, to=["127.0.0.1"], at=2.0)
    script = [{"tool": "docs__whoami", "args": {}}, {"finish": "done"}]
    agent_id = create(rt, tmp_path, script, [EVERYTHING, NETWORK], remote)
    rt.vault().set("default", "DOCS_TOKEN", TOKEN, to=["*.example.com"], at=3.0)
    state = rt.run(agent_id).state
    assert state.status == "needs_attention"
    assert "may not be sent to '127.0.0.1'" in state.status_reason
    rt.close()
