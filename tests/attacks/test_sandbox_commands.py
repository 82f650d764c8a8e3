"""Boundary: commands in the sandbox (docs/security.md).

A command is the model's to choose, so it is hostile. What must never
happen: a command reaches a process it did not start (to trace it, read its
memory, take its descriptors or signal it), outlives its run, or forges the
result of a later run. These replay the takeover of bubblewrap's pid 1: a
plain ``shell`` command traced the sandbox's init (which the loop's
``kill -9 -1`` never kills), made it ``execve`` a program of its own, and
that program stopped the loop and answered ``done NONCE 0`` for every later
command, so ``exit 7`` was journaled as exit 0.
"""

from __future__ import annotations

import os
import platform
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stead.sandbox.base import Limits
from stead.sandbox.bwrap import BwrapSandbox
from stead.sandbox.session import SandboxSession
from tests.needs import missing

REPLAY = Path(__file__).parent / "replays" / "pid1_takeover.py"
ENV = {"PATH": "/usr/bin:/bin"}
LIMITS = Limits(wall_seconds=20)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    if not Path("/usr/bin/python3").exists():
        # the sandbox shows the host's /usr, so the attack needs the system python3
        why = "the attack is a python3 script run inside the sandbox; no /usr/bin/python3"
        missing(why, "replay the pid-1 takeover")
    ws = tmp_path / f"ws-{uuid.uuid4().hex[:12]}"
    ws.mkdir()
    shutil.copy(REPLAY, ws / "takeover.py")
    return ws


@pytest.fixture
def session(bwrap: BwrapSandbox, workspace: Path) -> Iterator[SandboxSession]:
    s = SandboxSession(bwrap, workspace)
    yield s
    s.close()


def _doors(runner: SandboxSession | BwrapSandbox, workspace: Path) -> dict[int, list[str]]:
    r = runner.run(["/usr/bin/python3", "takeover.py", "probe"], workspace, env=ENV, limits=LIMITS)
    assert r.exit_code == 0, r
    found = {int(line.split()[0]): line.split()[1:] for line in r.stdout.splitlines()}
    assert found, r  # it saw at least the process that runs it
    return found


def test_no_command_can_trace_read_or_take_from_another_process(
    session: SandboxSession, bwrap: BwrapSandbox, workspace: Path
) -> None:
    """Every process a command can see, pid 1 included, is shut to it."""
    session.run(["/bin/true"], workspace, env=ENV, limits=LIMITS)  # the loop is up
    for runner in (session, bwrap):
        for pid, words in _doors(runner, workspace).items():
            assert words == ["ptrace-denied", "vm-read-denied", "pidfd-denied", "mem-denied"], (
                runner,
                pid,
                words,
            )


def test_a_command_cannot_make_pid_1_answer_for_the_loop(
    session: SandboxSession, workspace: Path
) -> None:
    if platform.machine() != "x86_64":
        missing("the injection is written for x86_64", "replay the pid-1 takeover")
    assert session.run(["/bin/true"], workspace, env=ENV, limits=LIMITS).exit_code == 0
    tried = session.run(
        ["/usr/bin/python3", "takeover.py", "inject"], workspace, env=ENV, limits=LIMITS
    )
    assert "injected" not in tried.stdout, tried
    time.sleep(1.5)  # what an injected pid 1 waits before it stops the loop
    later = session.run(
        ["/bin/sh", "-c", "echo real; exit 7"],
        workspace,
        env=ENV,
        limits=Limits(wall_seconds=10),
    )
    assert (later.exit_code, later.stdout) == (7, "real\n"), later
    assert "forged" not in later.stdout


def test_the_start_probe_finds_any_reachable_process(bwrap: BwrapSandbox, workspace: Path) -> None:
    """The loop's first line looks at every process a command could see, not
    only the loop: with a readable process beside it, it says ``exposed``."""
    from stead.sandbox.sealed import PROBE

    script = "/bin/sleep 30 & exec 0>&1; " + PROBE + "; echo ready"
    r = bwrap.run(["/bin/sh", "-c", script], workspace, env=ENV, limits=LIMITS)
    assert r.stdout.split() == ["exposed"], r


def test_an_agent_cannot_forge_its_own_acceptance_check(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    """The whole attack through an agent: its command tries the takeover, and
    a goal whose check can never pass (``test -f /nonexistent``) stays open."""
    import yaml

    from stead.runtime.runtime import Runtime
    from stead.spec import parse_spec
    from stead.store.sqlite import SqliteStore

    if platform.machine() != "x86_64" or not Path("/usr/bin/python3").exists():
        missing("the injection is python3 code for x86_64", "replay the pid-1 takeover")
    folder = tmp_path / "spec"
    (folder / "project").mkdir(parents=True)
    shutil.copy(REPLAY, folder / "project" / "takeover.py")
    script = [
        {"tool": "shell", "args": {"command": "/usr/bin/python3 takeover.py inject"}},
        {"tool": "shell", "args": {"command": "sleep 2"}},
        {"complete_goal": "never"},
        {"finish": "done"},
    ]
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec(
        {
            "name": "forger",
            "model": "scripted:script.yaml",
            "tools": ["shell"],
            "workspace": "project",
            "goals": [
                {"id": "never", "description": "x", "accept": [{"command": "test -f /nonexistent"}]}
            ],
        },
        folder,
    )
    store = SqliteStore(tmp_path / "s.db")
    try:
        rt = Runtime(store, tmp_path / "data", sandbox=bwrap)
        agent = rt.create(spec).agent_id
        state = rt.run(agent).state
        kinds = [e.kind for e in store.read_events(agent)]
        assert [g["status"] for g in state.goals] == ["open"], (state.goals, kinds)
        assert state.status != "completed"
        assert "goal_rejected" in kinds and "finish_rejected" in kinds, kinds
        assert "goal_completed" not in kinds, kinds
        outputs = [str(c) for c in state.recent_calls]
        assert not any("'injected" in o for o in outputs), outputs
    finally:
        store.close()


def test_tmp_and_shm_are_bounded_and_dev_is_read_only(
    session: SandboxSession, bwrap: BwrapSandbox, workspace: Path
) -> None:
    """``/tmp`` and ``/dev/shm`` are the host's memory: a command used to fill
    12 GiB of each whatever its limits said."""
    from stead.sandbox.bwrap import TMPFS_BYTES

    fill = (
        "for d in /tmp /dev/shm; do "
        "head -c 400000000 /dev/zero > $d/fill 2>/dev/null; echo $? $(stat -c %s $d/fill); "
        "done; echo x > /dev/extra 2>/dev/null; echo $?"
    )
    for runner in (session, bwrap):
        r = runner.run(["/bin/sh", "-c", fill], workspace, env=ENV, limits=LIMITS)
        tmp, shm, dev = r.stdout.splitlines()
        for line in (tmp, shm):
            status, size = line.split()
            assert status != "0" and int(size) <= TMPFS_BYTES, (runner, r)
        assert dev != "0", (runner, r)


def test_no_command_writes_the_hosts_kernel_settings(
    session: SandboxSession, bwrap: BwrapSandbox, workspace: Path
) -> None:
    """A worker running as root maps the sandbox's root to the host's, and the
    kernel lets that uid write ``/proc/sys`` with no capability: one command set
    a host-wide setting (and ``core_pattern`` runs a program as root)."""
    setting = Path("/proc/sys/kernel/printk_ratelimit")
    before = setting.read_text()
    write = (
        f"echo 7 > {setting} 2>/dev/null; echo $?; "
        "echo h > /proc/sysrq-trigger 2>/dev/null; echo $?"
    )
    try:
        for runner in (session, bwrap):
            r = runner.run(["/bin/sh", "-c", write], workspace, env=ENV, limits=LIMITS)
            assert "0" not in r.stdout.split(), (runner, r)
            assert setting.read_text() == before
    finally:
        if setting.read_text() != before and os.geteuid() == 0:
            setting.write_text(before)


def test_no_command_makes_a_user_namespace_of_its_own(
    session: SandboxSession, bwrap: BwrapSandbox, workspace: Path
) -> None:
    """Inside a new user namespace a command holds every capability again, and
    with them the kernel's netfilter and mount code: none may be made."""
    probe = (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
        "print('made' if libc.unshare(0x10000000) == 0 else 'refused')"
    )
    for runner in (session, bwrap):
        r = runner.run(["/usr/bin/python3", "-c", probe], workspace, env=ENV, limits=LIMITS)
        assert r.stdout.split() == ["refused"], (runner, r)


def test_no_signal_from_a_command_ends_the_loop(session: SandboxSession, workspace: Path) -> None:
    """The loop is init, which the kernel shields only from signals it does not
    catch: a shell catches SIGINT, so it must ignore it (and commands get it back)."""
    assert session.run(["/bin/true"], workspace, env=ENV, limits=LIMITS).exit_code == 0
    helper = session.pid
    for sig in ("INT", "QUIT", "TERM", "HUP", "USR1", "USR2", "ALRM", "CHLD", "PIPE"):
        r = session.run(
            ["/bin/sh", "-c", f"kill -{sig} 1; echo after"], workspace, env=ENV, limits=LIMITS
        )
        assert (r.exit_code, r.stdout) == (0, "after\n"), (sig, r)
    assert session.pid == helper
    # a command still gets SIGINT's default: it ends there
    r = session.run(
        ["/bin/sh", "-c", "kill -INT $$; echo survived"], workspace, env=ENV, limits=LIMITS
    )
    assert "survived" not in r.stdout, r


def test_a_command_leaves_no_set_uid_file_in_the_workspace(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    """A worker run as root makes a command's files the host's root's: a set-uid
    copy of a program left in the workspace would make root of anyone who can
    reach it. The scan after the call clears the bits."""
    import stat

    import yaml

    from stead.runtime.runtime import Runtime
    from stead.spec import parse_spec
    from stead.store.sqlite import SqliteStore

    folder = tmp_path / "spec"
    folder.mkdir()
    make = "cp /usr/bin/id suid && chmod 6755 suid && mkdir -p d && cp -p suid d/again"
    script = [{"tool": "shell", "args": {"command": make}}, {"finish": "done"}]
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    spec = parse_spec({"name": "suid", "model": "scripted:script.yaml", "tools": ["shell"]}, folder)
    store = SqliteStore(tmp_path / "s.db")
    try:
        rt = Runtime(store, tmp_path / "data", sandbox=bwrap)
        agent = rt.create(spec).agent_id
        ws = rt.workspace(agent, "default").root
        state = rt.run(agent).state
        assert state.status == "completed", state.recent_calls
        for name in ("suid", "d/again"):
            mode = (ws / name).stat().st_mode
            assert stat.S_ISREG(mode) and not mode & (stat.S_ISUID | stat.S_ISGID), oct(mode)
    finally:
        store.close()
