"""A command cannot take over the session's loop, and so cannot outlive its run.

These replay the escape found against sandbox sessions: a command (python3
inside the sandbox) took the loop's control socket with ``pidfd_getfd``,
read the run's nonce from ``/proc/PID/mem``, stopped the loop and answered
``done NONCE 0`` for it; the worker believed the run was over while the
command's background process lived on beside the host-side file tools.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.needs import missing

from stead.sandbox.base import Limits
from stead.sandbox.bwrap import BwrapSandbox
from stead.sandbox.session import SandboxSession

ATTACK = Path(__file__).parent / "attacks" / "take_over_helper.py"
ENV = {"PATH": "/usr/bin:/bin"}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / f"ws-{uuid.uuid4().hex[:12]}"
    ws.mkdir()
    shutil.copy(ATTACK, ws / "attack.py")
    return ws


@pytest.fixture
def session(bwrap: BwrapSandbox, workspace: Path) -> Iterator[SandboxSession]:
    if not Path("/usr/bin/python3").exists():
        # the sandbox shows the host's /usr, so the attack needs the system python3
        why = "the attack is a python3 script run inside the sandbox; no /usr/bin/python3"
        missing(why, "replay the sandbox escape")
    s = SandboxSession(bwrap, workspace)
    yield s
    s.close()


def _grows(path: Path, seconds: float = 0.6) -> bool:
    before = path.stat().st_size if path.exists() else 0
    time.sleep(seconds)
    after = path.stat().st_size if path.exists() else 0
    return after > before


def test_a_command_cannot_reach_the_loop_or_forge_its_answer(
    session: SandboxSession, workspace: Path
) -> None:
    first = session.run(
        ["/bin/sh", "-c", "echo warm"], workspace, env=ENV, limits=Limits(wall_seconds=20)
    )
    assert first.stdout == "warm\n"
    r = session.run(
        ["/usr/bin/python3", "attack.py"], workspace, env=ENV, limits=Limits(wall_seconds=20)
    )
    words = r.stdout.split()
    assert "found" in words, r  # it could see the loop: the test tried the real attack
    # each door the escape used is shut
    assert "fd-read-denied" in words, r
    assert "getfd-denied" in words or "pidfd-denied" in words, r
    assert "mem-denied" in words, r
    assert "forged" not in words, r
    assert r.exit_code == 0
    # nothing the command started is alive once its run has ended
    assert not _grows(workspace / "alive")
    after = session.run(
        ["/bin/sh", "-c", "echo next"], workspace, env=ENV, limits=Limits(wall_seconds=20)
    )
    assert (after.exit_code, after.stdout) == (0, "next\n")


def test_nothing_a_command_leaves_behind_outlives_its_run(
    session: SandboxSession, workspace: Path
) -> None:
    """A command that tries to stop every other process (the loop included)
    and leaves a writer in the background gains nothing: the loop is the
    sandbox's init, which no signal from inside reaches, and it kills the
    writer before it answers."""
    r = session.run(
        [
            "/bin/sh",
            "-c",
            # stop every process but ourselves (the loop included), then leave
            # a writer in the background and exit
            "kill -STOP -1; (while :; do echo x >> /workspace/alive; sleep 0.05; done) & exit 0",
        ],
        workspace,
        env=ENV,
        limits=Limits(wall_seconds=2),
    )
    assert (r.exit_code, r.timed_out) == (0, False), r
    assert not _grows(workspace / "alive")


def test_no_environment_in_the_sandbox_names_a_host_folder(
    bwrap: BwrapSandbox, session: SandboxSession, workspace: Path
) -> None:
    show = ["/bin/sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"]
    for runner in (bwrap, session):
        r = runner.run(show, workspace, env=ENV, limits=Limits(wall_seconds=20))
        assert "PATH=/usr/bin:/bin" in r.stdout.splitlines()  # it did read environments
        assert str(workspace.parent) not in r.stdout
        if Path.cwd() != Path("/"):  # the worker's folder, which PWD used to carry in
            assert f"={Path.cwd()}" not in r.stdout
