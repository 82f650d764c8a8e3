"""Sandbox sessions: many commands in one bubblewrap, with real sandboxed processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
import yaml
from tests.sandbox.test_bwrap import _running

from stead.sandbox.base import Limits, RunResult, Unsandboxed
from stead.sandbox.bwrap import BwrapSandbox, pids_cgroup_root
from stead.sandbox.session import SandboxSession
from stead.spec import parse_spec
from stead.store.sqlite import SqliteStore
from stead.tools.base import ToolContext

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/workspace"}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    # a unique folder name: bubblewrap's command line names it, so a test can
    # find the session's processes on the host by it
    ws = tmp_path / f"ws-{uuid.uuid4().hex[:12]}"
    ws.mkdir()
    return ws


@pytest.fixture
def session(bwrap: BwrapSandbox, workspace: Path) -> Iterator[SandboxSession]:
    s = SandboxSession(bwrap, workspace)
    yield s
    s.close()


def sh(s: SandboxSession, ws: Path, script: str, **limits: object) -> RunResult:
    return s.run(["/bin/sh", "-c", script], ws, env=ENV, limits=Limits(**limits))  # type: ignore[arg-type]


def wait_gone(pattern: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pattern) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(pattern)


TRICKY = [
    "plain",
    "two words",
    "",
    "it's",
    'a "quoted" one',
    "line one\nline two\n",
    "\n",
    "$(touch /workspace/pwned)",
    "`touch /workspace/pwned`",
    "$HOME ${PATH} $$ $1 \\ \\n",
    "tab\there; and | pipes & > redirects < * ? [a] ~ #",
    "ünïcødé ✓ 日本",
    "-n",
    "x" * 5000,
]


def test_many_runs_share_one_sandbox_and_round_trip_exactly(
    session: SandboxSession, workspace: Path
) -> None:
    helper = None
    for i in range(20):
        r = sh(session, workspace, f"echo out{i}; echo err{i} >&2; exit {i % 7}")
        assert (r.exit_code, r.stdout, r.stderr) == (i % 7, f"out{i}\n", f"err{i}\n")
        helper = helper or session.pid
        assert session.pid == helper, "every run went to the same session"
    printed = session.run(
        ["/usr/bin/printf", "[%s]\\n", *TRICKY], workspace, env=ENV, limits=Limits()
    )
    assert printed.exit_code == 0
    assert printed.stdout == "".join(f"[{a}]\n" for a in TRICKY)
    env = {f"V{i}": value for i, value in enumerate(TRICKY)} | {"nl": "x", "IFS": "e", "PWD": "/"}
    shown = session.run(["/usr/bin/env", "-0"], workspace, env=env, limits=Limits())
    assert shown.exit_code == 0, shown.stderr
    assert dict(e.split("=", 1) for e in shown.stdout.split("\0")[:-1]) == env
    # variables named like the loop's own change nothing about the words
    again = session.run(
        ["/usr/bin/printf", "[%s]\\n", *TRICKY], workspace, env=env, limits=Limits()
    )
    assert again.stdout == printed.stdout
    assert not (workspace / "pwned").exists()
    missing = session.run(["/no/such/program"], workspace, env=ENV, limits=Limits())
    assert missing.exit_code == 127 and "not found" in missing.stderr
    assert session.pid == helper


def test_the_environment_is_only_what_is_given(
    session: SandboxSession, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEAD_LEAK_CHECK", "must-not-appear")
    direct = session.run(["/usr/bin/env"], workspace, env={"ONLY": "this"}, limits=Limits())
    assert direct.stdout == "ONLY=this\n"
    nothing = session.run(["/usr/bin/env"], workspace, env={}, limits=Limits())
    assert (nothing.exit_code, nothing.stdout) == (0, "")
    r = sh(session, workspace, "env")
    names = {line.split("=", 1)[0] for line in r.stdout.splitlines()}
    assert names <= {"PATH", "HOME", "PWD", "SHLVL", "_"} and "must-not-appear" not in r.stdout


def test_tmp_and_shm_are_empty_at_the_start_of_every_run(
    session: SandboxSession, workspace: Path
) -> None:
    plant = (
        "echo m > /tmp/m; echo m > /tmp/.hidden; echo m > /tmp/..two; echo m > /dev/shm/m; "
        "mkdir -p /tmp/d/e/f && echo m > /tmp/d/e/f/g && chmod 000 /tmp/d/e && chmod 500 /tmp/d; "
        "ln -s /workspace/keep /tmp/link; echo m > /dev/shm/.h"
    )
    (workspace / "keep").write_text("kept")
    assert sh(session, workspace, plant).exit_code == 0
    helper = session.pid
    r = sh(session, workspace, "ls -A /tmp /dev/shm")
    assert r.stdout == "/dev/shm:\n\n/tmp:\n", r
    assert session.pid == helper, "the session was cleaned, not replaced"
    assert (workspace / "keep").read_text() == "kept"
    assert oct((workspace / "keep").stat().st_mode)[-3:] == "644"


def test_dev_is_read_only_apart_from_shm(session: SandboxSession, workspace: Path) -> None:
    r = sh(session, workspace, "touch /dev/x || echo refused; touch /dev/shm/x && echo shm")
    assert r.stdout == "refused\nshm\n"


def test_a_background_process_does_not_outlive_its_run(
    session: SandboxSession, workspace: Path
) -> None:
    marker = f"{time.time() % 1000:.4f}"
    r = sh(session, workspace, f"sleep 3{marker} & echo $! > /workspace/bg.pid; ls /proc")
    assert r.exit_code == 0
    pid = (workspace / "bg.pid").read_text().strip()
    probe = sh(
        session,
        workspace,
        f"if kill -0 {pid} 2>/dev/null; then echo alive; else echo gone; fi; "
        "ls -d /proc/[0-9]* | wc -l",
    )
    # init, the helper, this shell and ls/wc: nothing left from the run before
    assert probe.stdout.split()[0] == "gone", probe
    assert int(probe.stdout.split()[1]) <= 5, probe
    assert not _running(f"sleep 3{marker}")
    session.close()
    assert wait_gone(workspace.name)


def test_a_run_past_its_timeout_is_killed_and_the_next_starts_fresh(
    session: SandboxSession, workspace: Path
) -> None:
    marker = f"{time.time() % 1000:.4f}"
    assert sh(session, workspace, "echo > /dev/shm/left").exit_code == 0
    first = session.pid
    started = time.monotonic()
    r = sh(
        session,
        workspace,
        f"echo partial; sleep 5{marker} & sleep 6{marker}",
        wall_seconds=0.5,
    )
    assert r.timed_out and r.exit_code is None and r.stdout == "partial\n"
    assert time.monotonic() - started < 3
    assert session.pid is None
    assert wait_gone(f"sleep 5{marker}") and wait_gone(f"sleep 6{marker}")
    after = sh(session, workspace, "echo again")
    assert (after.exit_code, after.stdout) == (0, "again\n")
    assert session.pid not in (None, first)


def test_a_fork_bomb_and_a_memory_hog_are_stopped(session: SandboxSession, workspace: Path) -> None:
    assert pids_cgroup_root() is not None or os.geteuid() != 0
    started = time.monotonic()
    bomb = sh(
        session,
        workspace,
        "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived",
        processes=64,
        wall_seconds=10,
        output_bytes=2000,
    )
    assert time.monotonic() - started < 10
    assert "fork" in bomb.stderr.lower() or "resource temporarily" in bomb.stderr.lower()
    hog = session.run(
        ["/usr/bin/python3", "-c", "x = bytearray(2 * 1024 ** 3); print('ok')"],
        workspace,
        env=ENV,
        limits=Limits(memory_bytes=256 * 1024 * 1024, wall_seconds=30),
    )
    assert hog.exit_code != 0 and "MemoryError" in hog.stderr
    after = sh(session, workspace, "ls -d /proc/[0-9]* | wc -l")
    assert after.exit_code == 0 and int(after.stdout) <= 5


def test_output_over_the_cap_is_cut_and_reported(session: SandboxSession, workspace: Path) -> None:
    r = sh(
        session,
        workspace,
        "head -c 300000 /dev/zero | tr '\\0' a; echo end >&2",
        output_bytes=1000,
    )
    assert r.exit_code == 0 and r.stderr == "end\n"
    assert r.stdout == "a" * 1000 + "\n… [299000 more bytes]"
    assert sh(session, workspace, "echo next").stdout == "next\n"


# a session's loop is a shell whose script starts ``nl=``; a one-shot run's
# pid 1 is one whose script starts otherwise (its arguments, this text
# among them, follow the script)
WHERE = (
    "case \"$(tr '\\0' ' ' < /proc/$PPID/cmdline)\" in "
    "'/run/stead/sh -c nl='*) echo session;; *) echo one-shot;; esac"
)


def _ppid(ctx_or_session: ToolContext | SandboxSession, ws: Path, **kw: bool) -> str:
    """``session`` when the command's parent is a session's loop, else ``one-shot``."""
    argv = ["/bin/sh", "-c", WHERE]
    if isinstance(ctx_or_session, ToolContext):
        return ctx_or_session.run(argv).stdout.strip()
    return ctx_or_session.run(argv, ws, env=ENV, limits=Limits(), **kw).stdout.strip()


def test_runs_with_secrets_network_or_another_folder_are_one_shot(
    session: SandboxSession, workspace: Path, tmp_path: Path
) -> None:
    def ctx(secrets: Mapping[str, str]) -> ToolContext:
        return ToolContext("ag", "t", "c", "ag/c", workspace, sandbox=session, secrets=secrets)

    assert _ppid(ctx({"TOKEN": "s3cret"}), workspace) == "one-shot"
    assert session.pid is None, "a run with secrets started no session"
    assert _ppid(ctx({}), workspace) == "session"
    helper = session.pid
    assert helper is not None
    seen = ctx({"TOKEN": "s3cret"}).run(["/bin/sh", "-c", 'echo "$TOKEN"; ls /proc'])
    assert seen.stdout.split()[0] == "s3cret"
    assert _ppid(session, workspace, network=True) == "one-shot"
    other = tmp_path / "other"
    other.mkdir()
    assert _ppid(session, other) == "one-shot"
    long = session.run(
        ["/bin/sh", "-c", WHERE, "-", "x" * 20_000], workspace, env=ENV, limits=Limits()
    )
    assert long.stdout == "one-shot\n", "a long request is quicker one-shot than read by sh"
    assert session.pid == helper, "the session lives on beside one-shot runs"


class CountingSandbox(BwrapSandbox):
    """A sandbox that changes how a run works: a session must leave it alone."""

    def __init__(self, binary: str) -> None:
        super().__init__(binary)
        self.runs = 0

    def run(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
    ) -> RunResult:
        self.runs += 1
        return super().run(argv, workspace, env=env, limits=limits, network=network)


def test_anything_but_bubblewrap_itself_gets_every_run(
    bwrap: BwrapSandbox, workspace: Path
) -> None:
    plain = SandboxSession(Unsandboxed(), workspace)
    assert sh(plain, workspace, "pwd").stdout.strip() == str(workspace)
    counting = CountingSandbox(bwrap.binary)
    wrapped = SandboxSession(counting, workspace)
    assert sh(wrapped, workspace, "echo $PPID").stdout == "1\n"
    assert counting.runs == 1 and wrapped.pid is None
    plain.close()
    wrapped.close()


def test_close_leaves_no_process_and_can_be_repeated(
    session: SandboxSession, workspace: Path
) -> None:
    assert sh(session, workspace, "true").exit_code == 0
    assert _running(workspace.name), "the session's bubblewrap runs between commands"
    live = session._live  # its pids cgroup, if the machine let it make one
    group = live.cgroup if live is not None else None
    session.close()
    session.close()
    assert wait_gone(workspace.name)
    assert group is None or not group.exists()


def test_a_command_cannot_kill_or_stop_the_loop(session: SandboxSession, workspace: Path) -> None:
    """The loop is the sandbox's pid 1, which the kernel shields from every
    signal sent inside its namespace: the session goes on."""
    assert sh(session, workspace, "echo warm").stdout == "warm\n"
    helper = session.pid
    r = sh(session, workspace, "kill -9 $PPID; kill -STOP $PPID; kill -9 -1; echo after")
    assert (r.exit_code, r.stdout) == (0, "after\n"), r
    assert sh(session, workspace, "echo same").stdout == "same\n"
    assert session.pid == helper


def test_a_killed_worker_leaves_no_sandboxed_process(bwrap: BwrapSandbox, workspace: Path) -> None:
    marker = f"{time.time() % 1000:.4f}"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from stead.sandbox.base import Limits
        from stead.sandbox.session import SandboxSession
        s = SandboxSession(None, Path({str(workspace)!r}))
        env = {{"PATH": "/usr/bin:/bin"}}
        s.run(["/bin/true"], Path({str(workspace)!r}), env=env, limits=Limits())
        print("idle", flush=True)
        sys.stdin.readline()
        s.run(["/bin/sh", "-c", "sleep 3{marker} & sleep 4{marker}"],
              Path({str(workspace)!r}), env=env, limits=Limits(wall_seconds=60))
    """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdin is not None and worker.stdout is not None
    assert worker.stdout.readline() == "idle\n"
    assert _running(workspace.name), "the session waits between commands"
    worker.stdin.write("go\n")
    worker.stdin.flush()
    deadline = time.monotonic() + 20
    while not _running(f"sleep 4{marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(f"sleep 4{marker}"), "the sandboxed command never started"
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    worker.stdin.close()
    worker.stdout.close()
    for pattern in (f"sleep 3{marker}", f"sleep 4{marker}", workspace.name):
        assert wait_gone(pattern), pattern


def test_an_activation_runs_its_commands_in_one_session_and_closes_it(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    from stead.runtime.runtime import Runtime

    folder = tmp_path / "spec"
    folder.mkdir()
    script = [
        {"tool": "shell", "args": {"command": WHERE + " > first; sleep 300 &"}},
        {"tool": "shell", "args": {"command": WHERE + " > second; ls -d /proc/[0-9]* > procs"}},
        {"finish": "done"},
    ]
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec(
        {"name": "two-commands", "model": "scripted:script.yaml", "tools": ["shell"]}, folder
    )
    store = SqliteStore(tmp_path / "s.db")
    rt = Runtime(store, tmp_path / "data", sandbox=bwrap)
    agent = rt.create(spec).agent_id
    ws = rt.workspace(agent, rt.store.get_record(agent).tenant).root
    state = rt.run(agent).state
    store.close()
    assert state.status == "completed", state.recent_calls
    assert (ws / "first").read_text() == (ws / "second").read_text() == "session\n"
    # the loop, the shell, ls: the first command's sleep is gone
    assert len((ws / "procs").read_text().split()) <= 3
    assert wait_gone(str(ws.resolve()))
