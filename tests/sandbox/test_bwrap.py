"""The bubblewrap sandbox, with real sandboxed processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from stead.errors import SandboxUnavailable
from stead.sandbox import select as select_module
from stead.sandbox.base import Limits, Unsandboxed
from stead.sandbox.bwrap import BwrapSandbox, pids_cgroup_root
from stead.sandbox.select import select

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/workspace"}


@pytest.fixture
def sandbox(bwrap: BwrapSandbox) -> BwrapSandbox:
    return bwrap


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspaces" / "default" / "ag_me"
    ws.mkdir(parents=True)
    return ws


def sh(sandbox: BwrapSandbox, ws: Path, script: str, **limits: object) -> tuple[int | None, str]:
    result = sandbox.run(["/bin/sh", "-c", script], ws, env=ENV, limits=Limits(**limits))  # type: ignore[arg-type]
    return result.exit_code, result.stdout + result.stderr


def test_only_the_workspace_is_writable(
    sandbox: BwrapSandbox, workspace: Path, tmp_path: Path
) -> None:
    code, out = sh(sandbox, workspace, "echo hi > /workspace/ok.txt && pwd")
    assert code == 0 and out.strip() == "/workspace"
    assert (workspace / "ok.txt").read_text() == "hi\n"
    for target in ("/usr/stead-x", "/etc/stead-x", f"{tmp_path}/outside.txt", "/stead-x"):
        code, out = sh(sandbox, workspace, f"echo x > {target}")
        assert code != 0, target
    assert not (tmp_path / "outside.txt").exists()


def test_other_workspaces_the_store_and_root_are_invisible(
    sandbox: BwrapSandbox, workspace: Path, tmp_path: Path
) -> None:
    other = workspace.parent / "ag_other"
    other.mkdir()
    (other / "secret.txt").write_text("other agent's data")
    store = tmp_path / "stead.db"
    store.write_text("the store")
    for path in (other / "secret.txt", store, Path("/root"), Path("/home")):
        code, out = sh(sandbox, workspace, f"ls {path} || cat {path}")
        assert code != 0, (path, out)
        assert "other agent's data" not in out and "the store" not in out
    code, out = sh(sandbox, workspace, "ls /")
    assert set(out.split()) <= {
        "bin",
        "dev",
        "etc",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "proc",
        "run",  # holds only pid 1's execute-only shell (checked below)
        "sbin",
        "tmp",
        "usr",
        "workspace",
    }
    code, out = sh(sandbox, workspace, "find /run")
    assert out.split() == ["/run", "/run/stead", "/run/stead/sh"], out


def test_tmp_and_shm_are_fresh_every_run(sandbox: BwrapSandbox, workspace: Path) -> None:
    marker = uuid.uuid4().hex
    code, _ = sh(sandbox, workspace, f"echo {marker} > /tmp/m && echo {marker} > /dev/shm/m")
    assert code == 0
    code, out = sh(sandbox, workspace, "cat /tmp/m /dev/shm/m")
    assert code != 0 and marker not in out
    assert not Path("/tmp/m").exists() or marker not in Path("/tmp/m").read_text()


def test_the_environment_is_only_what_is_given(
    sandbox: BwrapSandbox, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEAD_LEAK_CHECK", "must-not-appear")
    _code, out = sh(sandbox, workspace, "env")
    names = {line.split("=", 1)[0] for line in out.splitlines()}
    assert "STEAD_LEAK_CHECK" not in names and "must-not-appear" not in out
    assert names <= {"PATH", "HOME", "PWD", "SHLVL", "_"}


def test_no_network_without_a_grant(sandbox: BwrapSandbox, workspace: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(5)
    thread = threading.Thread(target=lambda: accepted.append(_accept(server)))
    thread.start()
    probe_script = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {port}), 2); print('connected')"
    )
    result = sandbox.run(
        ["/usr/bin/python3", "-c", probe_script], workspace, env=ENV, limits=Limits(wall_seconds=10)
    )
    thread.join()
    server.close()
    assert result.exit_code != 0 and "connected" not in result.stdout
    assert accepted == [None], "the server saw no connection"


def _accept(server: socket.socket) -> object:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return None
    conn.close()
    return "connection"


def test_a_memory_hog_is_stopped(sandbox: BwrapSandbox, workspace: Path) -> None:
    result = sandbox.run(
        ["/usr/bin/python3", "-c", "x = bytearray(2 * 1024 ** 3); print('ok')"],
        workspace,
        env=ENV,
        limits=Limits(memory_bytes=256 * 1024 * 1024, wall_seconds=30),
    )
    assert result.exit_code != 0 and "ok" not in result.stdout
    assert "MemoryError" in result.stderr


def test_a_fork_bomb_is_stopped(sandbox: BwrapSandbox, workspace: Path) -> None:
    assert pids_cgroup_root() is not None or os.geteuid() != 0, (
        "as root, only a pids cgroup can bound processes; `stead doctor` reports this"
    )
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived"
    started = time.monotonic()
    _code, out = sh(sandbox, workspace, bomb, processes=64, wall_seconds=10)
    assert time.monotonic() - started < 10
    assert "fork" in out.lower() or "resource temporarily unavailable" in out.lower()
    # nothing of it is left running
    assert not _running("bomb")


def test_a_command_past_its_timeout_dies_with_its_children(
    sandbox: BwrapSandbox, workspace: Path
) -> None:
    marker = f"{time.time() % 1000:.4f}"
    started = time.monotonic()
    result = sandbox.run(
        ["/bin/sh", "-c", f"sleep 1{marker} & sleep 2{marker}"],
        workspace,
        env=ENV,
        limits=Limits(wall_seconds=0.5),
    )
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 5
    time.sleep(0.2)
    assert not _running(f"sleep 1{marker}") and not _running(f"sleep 2{marker}")


def test_a_killed_worker_leaves_no_sandboxed_process(tmp_path: Path, sandbox: BwrapSandbox) -> None:
    marker = f"{time.time() % 1000:.4f}"
    ws = tmp_path / "ws"
    ws.mkdir()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        from pathlib import Path
        from stead.sandbox.base import Limits
        from stead.sandbox.select import select
        select().run(["/bin/sh", "-c", "sleep 3{marker} & sleep 4{marker}"], Path({str(ws)!r}),
                     env={{"PATH": "/usr/bin:/bin"}}, limits=Limits(wall_seconds=60))
    """),
        ]
    )
    deadline = time.monotonic() + 20
    while not _running(f"sleep 4{marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(f"sleep 4{marker}"), "the sandboxed command never started"
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    deadline = time.monotonic() + 5
    while (
        _running(f"sleep 3{marker}") or _running(f"sleep 4{marker}")
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(f"sleep 3{marker}") and not _running(f"sleep 4{marker}")


def _running(pattern: str) -> bool:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if pattern in cmdline and state != "Z":
            return True
    return False


def test_without_a_sandbox_commands_are_refused_unless_opted_in(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    monkeypatch.setattr(select_module, "probe", lambda: (None, "no bubblewrap binary"))
    monkeypatch.delenv("STEAD_UNSANDBOXED", raising=False)
    with pytest.raises(SandboxUnavailable, match="STEAD_UNSANDBOXED=1"):
        select()
    monkeypatch.setenv("STEAD_UNSANDBOXED", "1")
    chosen = select()
    assert isinstance(chosen, Unsandboxed) and not chosen.isolation().isolated
    result = chosen.run(["/bin/sh", "-c", "pwd"], workspace, env=ENV, limits=Limits())
    assert result.stdout.strip() == str(workspace)
