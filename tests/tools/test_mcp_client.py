"""The MCP client against real servers, unsandboxed and in bubblewrap.

The servers are real processes: the reference ``mcp-server-time`` and
``mcp-server-git`` from PyPI (dev dependencies), and ``tests.tools.mcp_servers``,
which misbehaves on request. Nothing is mocked: a failure must come back as
one clear :class:`McpServerError`, and after ``close()`` nothing of the server
may be left running.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from stead.errors import UsageError
from stead.sandbox.base import Limits, Spawned, Unsandboxed
from stead.sandbox.bwrap import BwrapSandbox, interpreter_paths, pids_cgroup_root
from stead.tools.mcp import McpClient, McpServerError

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SERVER = [sys.executable, "-m", "tests.tools.mcp_servers"]
IDENTITY = {
    "GIT_AUTHOR_NAME": "stead test",
    "GIT_AUTHOR_EMAIL": "test@stead.invalid",
    "GIT_COMMITTER_NAME": "stead test",
    "GIT_COMMITTER_EMAIL": "test@stead.invalid",
}
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TZ": "UTC", **IDENTITY}

Start = Callable[[Sequence[str]], Spawned]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def plain(workspace: Path) -> Start:
    def start(argv: Sequence[str]) -> Spawned:
        return Unsandboxed().spawn(argv, workspace, env=ENV, limits=Limits())

    return start


def sandboxed(sandbox: BwrapSandbox, workspace: Path) -> Start:
    # the repository for tests.tools.mcp_servers; the venv and its Python for the rest
    paths = (str(REPO), *interpreter_paths())

    def start(argv: Sequence[str]) -> Spawned:
        return sandbox.spawn(argv, workspace, env=ENV, limits=Limits(), ro_paths=paths)

    return start


@pytest.fixture(params=["unsandboxed", "bubblewrap"])
def where(request: pytest.FixtureRequest, workspace: Path) -> tuple[Start, Path]:
    """How to start a server, and where it sees the workspace."""
    if request.param == "unsandboxed":
        return plain(workspace), workspace
    return sandboxed(request.getfixturevalue("bwrap"), workspace), Path("/workspace")


@pytest.fixture
def misbehaving(workspace: Path) -> Iterator[McpClient]:
    with McpClient.stdio(SERVER, start=plain(workspace), name="misbehaving") as client:
        yield client


def script(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is a dev dependency: run `make .venv/.installed`"
    return str(path)


def live_in_group(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run (zombies are dead, if unreaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def pids_cgroup(pid: int) -> Path | None:
    """The pids cgroup stead made for a sandboxed process (``None`` if this
    machine lets stead make none)."""
    root = pids_cgroup_root()
    if root is None:
        return None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        name = line.split(":", 2)[2].strip("/")
        if name.startswith("stead-") and (root / name).is_dir():
            return root / name
    raise AssertionError(f"process {pid} is in no pids cgroup of stead's")


def assert_gone(client: McpClient, pid: int) -> None:
    """The server's process is reaped (no entry at all, not even a zombie),
    and nothing of its process group runs on."""
    assert not client.alive
    assert not Path(f"/proc/{pid}").exists(), Path(f"/proc/{pid}/status").read_text()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert live_in_group(pid) == []


# -- real servers --------------------------------------------------------------


def test_the_time_server_tells_the_time(where: tuple[Start, Path]) -> None:
    start, _ = where
    with McpClient.stdio([script("mcp-server-time")], start=start) as client:
        tools = {tool["name"]: tool for tool in client.list_tools()}
        now = tools["get_current_time"]
        assert now["inputSchema"]["required"] == ["timezone"]
        assert now["annotations"]["readOnlyHint"] is True
        result = client.call_tool("get_current_time", {"timezone": "UTC"}, timeout=20)
        assert result["isError"] is False
        assert result["structuredContent"]["timezone"] == "UTC"
        assert result["content"][0]["type"] == "text"
        wrong = client.call_tool("get_current_time", {"timezone": "Nope/Zone"}, timeout=20)
        assert wrong["isError"] is True  # a tool's failure is a result, not an error
        pid = client.pid
        assert pid is not None and client.alive
    assert_gone(client, pid)


def test_the_git_server_commits(where: tuple[Start, Path], workspace: Path) -> None:
    start, inside = where
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "hello.txt").write_text("hello\n")
    argv = [script("mcp-server-git"), "--repository", str(inside)]
    with McpClient.stdio(argv, start=start) as client:
        names = {tool["name"] for tool in client.list_tools()}
        assert {"git_add", "git_commit", "git_log"} <= names
        added = client.call_tool(
            "git_add", {"repo_path": str(inside), "files": ["hello.txt"]}, timeout=20
        )
        assert added["isError"] is False, added
        message = "First commit, made over MCP"
        made = client.call_tool(
            "git_commit", {"repo_path": str(inside), "message": message}, timeout=20
        )
        assert made["isError"] is False, made
    log = subprocess.run(
        ["git", "-C", str(workspace), "log", "--format=%s|%an"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert log.stdout.strip() == f"{message}|stead test"


def test_streamable_http_sends_the_headers(tmp_path: Path) -> None:
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = subprocess.Popen(
        [*SERVER, "http", str(listening.fileno())],
        pass_fds=[listening.fileno()],
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    listening.close()
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        with McpClient.http(url, {"Authorization": "Bearer t0ken"}) as client:
            assert len(client.list_tools()) == 7
            seen = client.call_tool("whoami", {}, timeout=10)
            assert seen["content"][0]["text"] == "Bearer t0ken"
            assert client.call_tool("echo", {"text": "over HTTP"}, timeout=10)["content"] == [
                {"type": "text", "text": "over HTTP"}
            ]
            assert client.pid is None and client.stderr_tail() == ""
    finally:
        server.kill()
        server.wait()
    with pytest.raises(McpServerError, match="could not be reached"):
        McpClient.http(url, start_timeout=10)  # nothing listens there any more


# -- misbehaving servers -------------------------------------------------------


def test_pages_of_tools_are_followed_and_results_are_wire_json(misbehaving: McpClient) -> None:
    names = [tool["name"] for tool in misbehaving.list_tools()]
    assert names == ["echo", "crash", "hang", "flood", "huge", "badschema", "whoami"]
    result = misbehaving.call_tool("echo", {"text": "hi"}, timeout=10)
    assert result == {
        "content": [{"type": "text", "text": "hi"}],
        "isError": False,
        "resultType": "complete",
    }
    assert "echo: hi" in misbehaving.stderr_tail()


def test_close_from_another_thread_ends_a_waiting_call_at_once(misbehaving: McpClient) -> None:
    pid = misbehaving.pid
    assert pid is not None
    caught: list[BaseException] = []

    def call() -> None:
        try:
            misbehaving.call_tool("hang", {}, timeout=30)
        except BaseException as exc:
            caught.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.5)
    began = time.monotonic()
    misbehaving.close()
    misbehaving.close()  # again: nothing happens
    caller.join(5)
    assert time.monotonic() - began < 2
    assert len(caught) == 1 and isinstance(caught[0], McpServerError)
    assert "was closed during the call to hang" in str(caught[0])
    assert_gone(misbehaving, pid)


# -- spawning ------------------------------------------------------------------


def test_read_only_paths_follow_tmp_and_skip_usr(
    bwrap: BwrapSandbox, workspace: Path, tmp_path: Path
) -> None:
    wanted = ["/usr/lib", "/tmp/venv", "/opt/py/lib", "/opt/py/"]
    argv = bwrap.command(["/bin/true"], workspace, {}, False, ro_paths=wanted)
    binds = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--ro-bind"]
    assert "/usr/lib" not in binds and "/opt/py/lib" not in binds  # covered already
    assert argv.index("/tmp/venv") > argv.index("--tmpfs") and "/opt/py" in binds
    (tmp_path / "to-proc").symlink_to("/proc")
    bad = ["/", "//", "relative/path", "/proc/self", "//proc", "/tmp", "/workspace/x", "/sys"]
    for path in [*bad, str(tmp_path / "to-proc")]:
        with pytest.raises(UsageError):
            bwrap.command(["/bin/true"], workspace, {}, False, ro_paths=[path])


def test_a_spawned_process_has_the_limits_but_the_times(
    bwrap: BwrapSandbox, workspace: Path
) -> None:
    small = Limits(memory_bytes=64 * 1024 * 1024, processes=9, cpu_seconds=1, wall_seconds=1)
    spawned = bwrap.spawn(
        ["/bin/sh", "-c", "ulimit -v; ulimit -t; cat"], workspace, env=ENV, limits=small
    )
    try:
        assert spawned.proc.stdout is not None and spawned.exit_code() is None
        assert spawned.proc.stdout.readline() == b"65536\n"
        assert spawned.proc.stdout.readline() == b"unlimited\n"  # no CPU limit: it lives on
        group = pids_cgroup(spawned.pid)
        if group is not None:
            assert (group / "pids.max").read_text().strip() == "9"
    finally:
        spawned.close()
        spawned.close()
    assert spawned.exit_code() == -9 and not _running(spawned.pid)
    assert group is None or not group.exists()


def test_importing_stead_does_not_import_the_sdk() -> None:
    code = (
        "import sys, stead, stead.tools.mcp;"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'httpx2'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
