"""Boundary: MCP servers (docs/security.md).

An MCP server is a program of someone else's, or a service behind a URL, and
may crash, hang, flood its stdout, send a message too large to hold, answer
off its own schema, or try to read what is not its agent's. What must never
happen: a server stalls or crashes the worker, outlives its call's timeout or
its activation (with its children), sees more of the host than its agent's
sandbox shows, or has a call it was serving sent again after it died.

The agent-level tests run ``tests/tools/mcp_servers.py`` in its ``agent``
mode, as a script inside the agent's bubblewrap sandbox (the spec ``mounts``
its folder). Each server is given a tag no other process has, on its command
line, so what is left of it (the launcher, bubblewrap, the server, the
grandchild ``hang`` starts) can be found in ``/proc``: while the agent runs, a
thread notes every pid whose command line carries the tag; afterwards none of
them may run, none may be a zombie left for this process (stead) to reap, and,
once the machine's init has reaped the orphans, none may have a /proc entry at
all. The client-level tests talk to the same server (``tests.tools.mcp_servers``)
through :class:`~stead.tools.mcp.McpClient` directly. The reference servers
(git from PyPI, the filesystem server from npm) are asked for what lies outside
the workspace.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.errors import McpServerError, ToolError
from stead.models.base import Decision, RenderedContext
from stead.models.scripted import ScriptedModel
from stead.sandbox.bwrap import BwrapSandbox
from stead.store.sqlite import SqliteStore
from stead.tools.mcp import McpClient

from ..tools import test_mcp_agent as git_agents
from ..tools import test_mcp_client as client_tests
from ..tools import test_mcp_filesystem as filesystem
from ..tools.test_mcp_client import (
    SERVER,
    _running,
    assert_gone,
    live_in_group,
    pids_cgroup,
    plain,
    sandboxed,
)
from .memory import MB, PeakRss

HERE = Path(__file__).resolve().parents[1] / "tools"
"""The folder of the misbehaving server, which its spec mounts."""
SERVERS = str(HERE / "mcp_servers.py")

workspace = client_tests.workspace
"""An empty folder for a server started outside an agent (tests/tools/test_mcp_client.py)."""
misbehaving = client_tests.misbehaving
"""A client of ``tests.tools.mcp_servers``, unsandboxed (tests/tools/test_mcp_client.py)."""
npm_dir = filesystem.npm_dir
"""The reference filesystem server, installed once (tests/tools/test_mcp_filesystem.py)."""


def agent_server(tag: str) -> dict[str, Any]:
    """The misbehaving server, with a 2 s timeout per call."""
    return {
        "name": "bad",
        "command": ["python", SERVERS, "agent", tag],
        "mounts": [str(HERE)],  # the server's script, read-only in the sandbox
        "timeout": 2,
    }


def make(tmp_path: Path, sandbox: Any, script: list[Any], **spec: Any) -> tuple[Runtime, str]:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock(),
                 sandbox=sandbox)  # fmt: skip
    data = {"name": "mcp", "model": "scripted:script.yaml", "scope": [{"tool": "*"}], **spec}
    parsed = parse_spec(data, tmp_path)
    Runtime.check_loads(parsed)
    return rt, rt.create(parsed).agent_id


def events(rt: Runtime, agent_id: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent_id) if e.kind == kind]


def results(rt: Runtime, agent_id: str) -> list[dict[str, Any]]:
    return events(rt, agent_id, Kind.TOOL_RESULT)


def cmdline(pid: str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode("utf-8", errors="replace").split("\0")


def stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and parent pid; None once it has no /proc entry."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


class Watch:
    """Notes every process whose command line carries ``tag``, while it is open."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.seen: dict[int, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while True:
            self.scan()
            if self._stop.wait(0.01):
                return

    def scan(self) -> None:
        # every time, not once per pid: a child seen between its fork and its
        # exec still has its parent's command line
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                argv = cmdline(entry.name)
                if any(self.tag in arg for arg in argv):
                    self.seen[int(entry.name)] = argv

    def servers(self) -> list[int]:
        """The pids of the server itself (each start of it once)."""
        return sorted(p for p, argv in self.seen.items() if argv[1:3] == [SERVERS, "agent"])

    def grandchildren(self) -> list[int]:
        return sorted(p for p, argv in self.seen.items() if f"grandchild-of-{self.tag}" in argv)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.scan()

    def assert_nothing_left(self, *, reaped_by_init: bool = False) -> None:
        """Nothing seen runs on, nothing carries the tag, and no zombie is left
        for this process to reap (its children are stead's to reap).

        Bubblewrap's pid-namespace init is orphaned when its launcher is
        killed, so the machine's init reaps it (this one takes a second or
        two); with ``reaped_by_init``, wait for that too: then no pid seen has
        a /proc entry at all.
        """
        assert self.servers(), "the watch saw no server: it proves nothing"
        states = {pid: stat(pid) for pid in self.seen}
        assert {p: s for p, s in states.items() if s and s[0] != "Z"} == {}, self.seen
        ours = {p: s for p, s in states.items() if s and s[1] == os.getpid()}
        assert ours == {}, "zombies of this process: stead did not reap them"
        now = Watch(self.tag)
        now.scan()
        assert now.seen == {}
        if reaped_by_init:
            deadline = time.monotonic() + 10
            while any(stat(pid) for pid in self.seen) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert {p: s for p in self.seen if (s := stat(p))} == {}


@pytest.fixture
def tag() -> str:
    return f"stead-mcp-test-{uuid.uuid4().hex}"


FAULTS = {
    "crash": ["MCP server 'bad' exited with code 3 during the call to crash",
              "crashing on purpose"],  # its stderr's tail
    "hang": ["MCP server 'bad' did not finish the call to hang within 2s and was stopped",
             "a hung server is not used again", "grandchild"],
    "flood": ["MCP server 'bad' was stopped during the call to flood",
              "more than 1 MiB on stdout that is not MCP"],
    "badschema": ["MCP server 'bad' answered the call to badschema with a result it cannot "
                  "give: Invalid structured content returned by tool badschema"],
}  # fmt: skip


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_faulty_call_fails_the_agent_goes_on_and_nothing_is_left(
    tmp_path: Path, bwrap: BwrapSandbox, tag: str, fault: str
) -> None:
    script = [{"tool": f"bad__{fault}", "args": {}},
              {"tool": "bad__echo", "args": {"text": "still here"}},
              {"finish": "done"}]  # fmt: skip
    rt, agent_id = make(tmp_path, bwrap, script, mcp=[agent_server(tag)])
    began = time.monotonic()
    with Watch(tag) as watch:
        state = rt.run(agent_id).state
    took = time.monotonic() - began
    assert state.status == "completed", state.status_reason
    failed, echoed = results(rt, agent_id)
    assert failed["tool"] == f"bad__{fault}" and failed["ok"] is False
    for part in FAULTS[fault]:
        assert part in failed["error"], failed["error"]
    # the next step ran, and its call succeeded: on the same server after a
    # result off its schema (it lives), on a server started again otherwise
    assert echoed["ok"] is True and echoed["output"] == "still here", echoed
    assert len(watch.servers()) == (1 if fault == "badschema" else 2), watch.seen
    # the failed call was effectful (no hints): its intent was journaled, and settled
    (intent,) = events(rt, agent_id, Kind.TOOL_INTENT)
    assert intent["call_id"] == failed["call_id"] and state.pending == {}
    if fault == "hang":
        assert took < 10  # stopped at the server's 2 s timeout, not the default 60 s
        assert watch.grandchildren(), "the hung server's grandchild was never seen"
    rt.close()
    watch.assert_nothing_left()


def test_a_server_that_dies_twice_fails_its_calls_until_the_next_activation(
    tmp_path: Path, bwrap: BwrapSandbox, tag: str
) -> None:
    echo = {"tool": "bad__echo", "args": {"text": "hi"}}
    crash = {"tool": "bad__crash", "args": {}}
    script = [crash, echo, crash, echo, echo, {"finish": "done"}]
    rt, agent_id = make(tmp_path, bwrap, script, mcp=[agent_server(tag)])
    with Watch(tag) as watch:
        state = rt.run(agent_id, max_steps=4).state  # one activation: four decisions
    assert state.status == "running"
    first, again, second, refused = results(rt, agent_id)
    assert not first["ok"] and "exited with code 3 during the call to crash" in first["error"]
    assert again["ok"] and again["output"] == "hi"  # started again once
    assert not second["ok"] and "exited with code 3" in second["error"]
    assert not refused["ok"]  # not started a third time
    assert "MCP server 'bad' stopped again after it was restarted" in refused["error"]
    assert "its calls fail until the agent's next activation" in refused["error"]
    assert "crashing on purpose" in refused["error"]  # the dead server's stderr
    assert len(watch.servers()) == 2, watch.seen
    watch.assert_nothing_left()  # the activation ended: its servers with it
    with Watch(tag) as later:
        state = rt.run(agent_id).state  # the next activation starts it afresh
    assert state.status == "completed", state.status_reason
    last = results(rt, agent_id)[-1]
    assert last["ok"] and last["output"] == "hi", last
    assert len(later.servers()) == 1
    rt.close()
    later.assert_nothing_left()
    watch.seen.update(later.seen)  # both activations' processes: not one /proc entry left
    watch.assert_nothing_left(reaped_by_init=True)


class Seeing(ScriptedModel):
    """The scripted model, keeping what it was shown at each step."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(ScriptedModel.from_data(script).decisions)
        self.shown: list[RenderedContext] = []

    def decide(self, context: RenderedContext) -> Decision:
        self.shown.append(context)
        return super().decide(context)


def test_a_result_marked_iserror_is_a_failed_call_the_agent_sees(
    tmp_path: Path, bwrap: BwrapSandbox, tag: str
) -> None:
    script = [{"tool": "bad__fail", "args": {}},
              {"tool": "bad__echo", "args": {"text": "after"}},
              {"finish": "done"}]  # fmt: skip
    rt, agent_id = make(tmp_path, bwrap, script, mcp=[agent_server(tag)])
    model = Seeing(script)
    with Watch(tag) as watch:
        state = rt.run(agent_id, model=model).state
    assert state.status == "completed", state.status_reason
    failed, echoed = results(rt, agent_id)
    assert failed["ok"] is False and "output" not in failed
    assert failed["error"] == "MCP tool 'fail' of server bad failed: the disk is on fire"
    assert echoed["ok"] is True
    # the model was shown the failure at its next step
    assert "the disk is on fire" not in model.shown[0].text
    assert "the disk is on fire" in model.shown[1].text
    assert len(watch.servers()) == 1  # a failed tool is not a failed server
    rt.close()
    watch.assert_nothing_left()


def test_a_server_whose_tools_change_is_listed_again_and_offered_next_activation(
    tmp_path: Path, bwrap: BwrapSandbox
) -> None:
    """The ``listing`` server offers a tool per word of /workspace/tools.txt."""
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "tools.txt").write_text("alpha\n", encoding="utf-8")
    listing = {"name": "lst", "command": ["python", SERVERS, "listing", "/workspace/tools.txt"],
               "mounts": [str(HERE)]}  # fmt: skip
    script = [
        {"tool": "write_file", "args": {"path": "tools.txt", "content": "alpha beta\n"}},
        {"tool": "lst__alpha", "args": {}},  # starts the server: it lists beta too now
        {"tool": "lst__beta", "args": {}},  # not in this activation
        {"tool": "lst__beta", "args": {}},  # in the next one
        {"finish": "done"},
    ]
    rt, agent_id = make(tmp_path, bwrap, script, mcp=[listing], tools=["write_file"],
                        workspace="seed")  # fmt: skip
    (created,) = events(rt, agent_id, Kind.MCP_TOOLS_LISTED)
    assert [t["name"] for t in created["tools"]] == ["echo", "alpha"]
    assert "changed" not in created
    assert sorted(rt.tools_for(rt.store.get_record(agent_id))) == [
        "lst__alpha", "lst__echo", "write_file"
    ]  # fmt: skip

    state = rt.run(agent_id, max_steps=3).state
    assert state.status == "running"
    first, changed = events(rt, agent_id, Kind.MCP_TOOLS_LISTED)
    assert first == created
    assert changed["server"] == "lst" and changed["changed"] is True
    assert [t["name"] for t in changed["tools"]] == ["echo", "alpha", "beta"]
    assert changed["digest"] != created["digest"]
    wrote, alpha, beta = results(rt, agent_id)
    assert wrote["ok"] and alpha["ok"] and alpha["output"] == "alpha here"
    assert not beta["ok"] and "unknown tool 'lst__beta'" in beta["error"]  # shown what it was
    rt.close()

    # the next activation, by another runtime on the same store, offers the new list
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock(),
                 sandbox=bwrap)  # fmt: skip
    tools = rt.tools_for(rt.store.get_record(agent_id))
    assert sorted(tools) == ["lst__alpha", "lst__beta", "lst__echo", "write_file"]
    assert "tool 'beta' of MCP server lst" in tools["lst__beta"].description
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    last = results(rt, agent_id)[-1]
    assert last["ok"] and last["output"] == "beta here", last
    # the server listed what the agent was shown already: nothing new journaled
    assert len(events(rt, agent_id, Kind.MCP_TOOLS_LISTED)) == 2
    rt.close()


# -- one server through the client: crashes, hangs, floods, lies -------------------------------


def test_a_crash_mid_call_says_how_it_exited(misbehaving: McpClient) -> None:
    pid = misbehaving.pid
    assert pid is not None
    with pytest.raises(McpServerError) as caught:
        misbehaving.call_tool("crash", {}, timeout=10)
    message = str(caught.value)
    assert "exited with code 3 during the call to crash" in message
    assert "crashing on purpose" in message  # its stderr
    assert isinstance(caught.value, ToolError)
    assert_gone(misbehaving, pid)
    with pytest.raises(McpServerError, match=r"is closed \(it exited with code 3"):
        misbehaving.call_tool("echo", {"text": "again?"}, timeout=10)


def test_a_hung_server_is_killed_at_the_timeout_with_its_children(misbehaving: McpClient) -> None:
    pid = misbehaving.pid
    assert pid is not None
    began = time.monotonic()
    with pytest.raises(McpServerError, match=r"did not finish the call to hang within 0.5s"):
        misbehaving.call_tool("hang", {}, timeout=0.5)
    assert time.monotonic() - began < 2.5  # SIGTERM is ignored: only SIGKILL ends it
    assert_gone(misbehaving, pid)
    grandchild = int(misbehaving.stderr_tail().split("grandchild ")[1].split()[0])
    assert grandchild not in live_in_group(pid) and not _running(grandchild)


def test_a_flood_of_garbage_on_stdout_stops_the_server(misbehaving: McpClient) -> None:
    pid = misbehaving.pid
    assert pid is not None
    with pytest.raises(McpServerError, match="more than 1 MiB on stdout that is not MCP"):
        misbehaving.call_tool("flood", {}, timeout=10)
    assert_gone(misbehaving, pid)


def test_a_result_too_large_stops_the_server(misbehaving: McpClient) -> None:
    pid = misbehaving.pid
    assert pid is not None
    with pytest.raises(McpServerError, match="sent a message longer than 8 MiB"):
        misbehaving.call_tool("huge", {}, timeout=10)
    assert_gone(misbehaving, pid)


def test_a_result_off_its_output_schema_is_refused_but_the_server_lives(
    misbehaving: McpClient,
) -> None:
    with pytest.raises(McpServerError, match=r"Invalid structured content .* badschema"):
        misbehaving.call_tool("badschema", {}, timeout=10)
    assert misbehaving.alive
    assert misbehaving.call_tool("echo", {"text": "still here"}, timeout=10)["isError"] is False


def test_a_server_that_exits_at_start_says_why(workspace: Path) -> None:
    with pytest.raises(McpServerError) as caught:
        McpClient.stdio([*SERVER, "exit"], start=plain(workspace))
    assert "exited with code 7 before it was ready" in str(caught.value)
    assert "cannot start: no configuration" in str(caught.value)
    with pytest.raises(McpServerError, match=r"could not be started: .*No such file"):
        McpClient.stdio(["/nonexistent/server"], start=plain(workspace))


def test_a_hung_server_in_bubblewrap_leaves_nothing(bwrap: BwrapSandbox, workspace: Path) -> None:
    with McpClient.stdio(SERVER, start=sandboxed(bwrap, workspace)) as client:
        pid = client.pid
        assert pid is not None
        group = pids_cgroup(pid)
        with pytest.raises(McpServerError, match="did not finish the call to hang"):
            client.call_tool("hang", {}, timeout=0.5)
        assert "grandchild" in client.stderr_tail()
    assert_gone(client, pid)
    assert group is None or not group.exists()


# -- what a server in the sandbox can reach -----------------------------------------------------


def test_an_mcp_server_in_the_sandbox_sees_only_the_workspace(
    tmp_path: Path, bwrap: BwrapSandbox
) -> None:
    """The git server is asked about a folder outside the workspace: the store's."""
    git_agents.seeded_repo(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path / "data")], check=True)
    script = [{"tool": "git__git_status", "args": {"repo_path": str(tmp_path / "data")}},
              {"finish": "done"}]  # fmt: skip
    git = {**git_agents.GIT, "command": ["mcp-server-git"]}  # no --repository: any path it can see
    rt, agent_id = git_agents.make(tmp_path, bwrap, script, workspace="seed", mcp=[git])
    rt.run(agent_id)
    (result,) = git_agents.events(rt, agent_id, Kind.TOOL_RESULT)
    assert not result["ok"] and str(tmp_path) in result["error"]
    rt.close()


def test_the_filesystem_server_reads_nothing_of_the_host(
    tmp_path: Path, bwrap: BwrapSandbox, npm_dir: Path
) -> None:
    store = str(tmp_path / "s.db")
    script = [
        {"tool": "fs__read_text_file", "args": {"path": "/etc/passwd"}},
        {"tool": "fs__read_text_file", "args": {"path": store}},
        # a link the agent makes in its workspace, to the store
        {"tool": "shell", "args": {"command": f"ln -s {store} /workspace/store.db"}},
        {"tool": "fs__read_text_file", "args": {"path": "/workspace/store.db"}},
        # a server that would serve the whole file system: the sandbox still hides the host
        {"tool": "wide__read_text_file", "args": {"path": "/etc/passwd"}},
        {"tool": "wide__read_text_file", "args": {"path": store}},
        {"tool": "wide__read_text_file", "args": {"path": "/workspace/store.db"}},
        {"tool": "wide__list_directory", "args": {"path": "/etc"}},
        {"finish": "done"},
    ]
    servers = [filesystem.fs_server(npm_dir), filesystem.fs_server(npm_dir, "wide", "/")]
    rt, agent_id = filesystem.make(tmp_path, bwrap, script, mcp=servers, tools=["shell"])
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    results = filesystem.events(rt, agent_id, Kind.TOOL_RESULT)
    fs_passwd, fs_store, linked, fs_link, wide_passwd, wide_store, wide_link, etc = results
    assert linked["tool"] == "shell" and linked["ok"], linked
    for result in (fs_passwd, fs_store, fs_link, wide_passwd, wide_store, wide_link):
        assert result["tool"].endswith("__read_text_file") and result["ok"] is False, result
    # the server's own check: outside the folders it was told to serve
    for result in (fs_passwd, fs_store):
        assert (
            "of server fs failed: Access denied - path outside allowed directories"
            in (result["error"])
        )
    # the sandbox's: the server would serve them, but they are not there
    for result in (wide_passwd, wide_store):
        assert "of server wide failed: ENOENT: no such file or directory" in result["error"]
    assert "of server fs failed" in fs_link["error"]  # a link to nothing, to both
    assert "of server wide failed" in wide_link["error"]
    assert etc["ok"] and "passwd" not in filesystem.text_of(etc["output"])  # not even its name
    # nothing of the host's files reached the journal
    journal = json.dumps([e.data for e in rt.store.read_events(agent_id)])
    lines = [line for line in Path("/etc/passwd").read_text().splitlines() if line.strip()]
    assert lines and not [line for line in lines if line in journal]
    assert "SQLite format 3" not in journal
    rt.close()
    assert os.path.islink(rt.workspace(agent_id, "default").root / "store.db")


def test_without_its_mount_the_server_cannot_be_read_in_the_sandbox(
    tmp_path: Path, bwrap: BwrapSandbox, npm_dir: Path
) -> None:
    unmounted = {**filesystem.fs_server(npm_dir), "mounts": []}
    with pytest.raises(McpServerError) as caught:
        filesystem.make(tmp_path, bwrap, [{"finish": "x"}], mcp=[unmounted])
    message = str(caught.value)
    assert "MCP server 'fs' could not be listed, so the agent was not made" in message
    assert "exited with code 1 before it was ready" in message
    assert (
        "Cannot find module" in message and str(npm_dir / filesystem.ENTRY) in message
    )  # node's stderr


# -- a remote server over streamable HTTP: answers too long or too slow (issue 26) --------------


class _Remote:
    """A hostile MCP server over streamable HTTP on 127.0.0.1, answering each
    JSON-RPC method with plain JSON (not server-sent events), as the protocol
    allows: ``answers`` maps a method to a function of the request giving the
    result (sent whole) or the chunks of the answer's body (sent without a
    length: it ends when the connection closes); any other method is answered
    as a well server would. The methods in ``events`` are answered as a stream
    of server-sent events instead."""

    def __init__(self, answers: dict[str, Any], events: frozenset[str] = frozenset()) -> None:
        self.answers = answers
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # no stream of the server's own messages
                self.send_response(405)
                self.send_header("content-length", "0")
                self.end_headers()

            do_DELETE = do_GET

            def do_POST(self) -> None:
                asked = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if "id" not in asked:  # a notification
                    self.send_response(202)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                answer = outer.answers.get(asked["method"], _Remote.well)(asked)
                self.close_connection = True
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(200)
                    plain = asked["method"] not in events
                    self.send_header(
                        "content-type", "application/json" if plain else "text/event-stream"
                    )
                    if isinstance(answer, dict):
                        whole = json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
                        self.send_header("content-length", str(len(whole)))
                        self.end_headers()
                        self.wfile.write(whole.encode())
                        return
                    self.end_headers()
                    for chunk in answer:
                        self.wfile.write(chunk)
                        self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}/mcp"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @staticmethod
    def well(asked: dict[str, Any]) -> dict[str, Any]:
        if asked["method"] == "initialize":
            return {
                "protocolVersion": asked["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
        return {"tools": []}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def remote() -> Iterator[Callable[[dict[str, Any]], _Remote]]:
    made: list[_Remote] = []

    def make(answers: dict[str, Any], events: frozenset[str] = frozenset()) -> _Remote:
        made.append(_Remote(answers, events))
        return made[-1]

    yield make
    for each in made:
        each.close()


def _endless(_asked: object) -> Iterator[bytes]:
    """A JSON-RPC answer that never ends (1 GiB, then the connection closes)."""
    yield b'{"jsonrpc": "2.0", "id": 0, "result": {"padding": "'
    chunk = b"x" * (64 * 1024)
    for _ in range(1024 * MB // len(chunk)):
        yield chunk


def _dripping(_asked: object) -> Iterator[bytes]:
    """A JSON-RPC answer that sends one byte a second, for 15 s."""
    yield b'{"jsonrpc": "2.0", "id": 0, "result": '
    for _ in range(15):
        time.sleep(1)
        yield b" "


def test_an_endless_plain_json_answer_to_initialize_is_cut_off(remote: Any) -> None:
    server = remote({"initialize": _endless})
    with PeakRss() as memory, pytest.raises(McpServerError) as caught:
        McpClient.http(server.url, start_timeout=30)
    assert "sent a message longer than 8 MiB" in str(caught.value), caught.value
    assert memory.growth < 100 * MB, f"the answer took {memory.growth // MB} MB"


def test_an_endless_plain_json_tool_listing_is_cut_off_and_not_used_again(remote: Any) -> None:
    server = remote({"tools/list": _endless})
    with McpClient.http(server.url) as client:
        with PeakRss() as memory, pytest.raises(McpServerError) as caught:
            client.list_tools(timeout=30)
        assert "sent a message longer than 8 MiB" in str(caught.value), caught.value
        assert memory.growth < 100 * MB, f"the answer took {memory.growth // MB} MB"
        assert not client.alive
        with pytest.raises(McpServerError, match="is closed"):
            client.list_tools()


def test_an_endless_server_sent_event_is_cut_off(remote: Any) -> None:
    def endless_event(_asked: object) -> Iterator[bytes]:
        yield b"event: message\ndata: "
        yield from itertools.islice(_endless(None), 1, None)

    server = remote({"tools/list": endless_event}, frozenset({"tools/list"}))
    with McpClient.http(server.url) as client:
        with PeakRss() as memory, pytest.raises(McpServerError) as caught:
            client.list_tools(timeout=30)
        assert "sent a message longer than 8 MiB" in str(caught.value), caught.value
        assert not client.alive
        assert memory.growth < 100 * MB, f"the event took {memory.growth // MB} MB"


@pytest.mark.parametrize("method", ["initialize", "tools/list"])
def test_a_dripping_remote_server_is_stopped_at_its_time(remote: Any, method: str) -> None:
    server = remote({method: _dripping})
    began = time.monotonic()
    with (
        pytest.raises(McpServerError, match=r"within 2s"),
        McpClient.http(server.url, start_timeout=2) as client,
    ):
        client.list_tools(timeout=2)
    took = time.monotonic() - began
    assert took < 2 + 3, f"the exchange took {took:.1f}s with 2 s allowed"


def test_a_tool_listing_too_large_in_all_is_refused(remote: Any) -> None:
    # each page (3 MiB) is a message within bounds; together they pass the listing's
    big = {"type": "object", "description": "y" * (3 * MB)}
    pages = itertools.count()

    def page(_asked: object) -> dict[str, Any]:
        n = next(pages)
        return {"tools": [{"name": f"t{n}", "inputSchema": big}], "nextCursor": str(n + 1)}

    server = remote({"tools/list": page})
    with (
        McpClient.http(server.url) as client,
        PeakRss() as memory,
        pytest.raises(McpServerError, match="listed more than 4 MiB of tools"),
    ):
        client.list_tools(timeout=30)
    assert memory.growth < 100 * MB, f"the listing took {memory.growth // MB} MB"


def test_a_tool_whose_schema_is_too_large_is_not_offered() -> None:
    from stead.tools.mcp.tools import schema_problem

    wide = {"type": "object", "properties": {f"p{n}": {"type": "string"} for n in range(5000)}}
    assert schema_problem({"name": "wide", "inputSchema": wide}) == (
        "its inputSchema is larger than 64 KiB"
    )
    assert schema_problem({"name": "small", "inputSchema": {"type": "object"}}) is None
