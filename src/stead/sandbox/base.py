"""The sandbox seam: run one command, isolated, with limits.

A :class:`Sandbox` runs an argument vector with the agent's workspace as the
only writable place, a scrubbed environment, and the :class:`Limits` given,
and reports what happened as a :class:`RunResult`. :func:`stead.sandbox.select`
picks the real one (bubblewrap) or, only when the operator opts in,
:class:`Unsandboxed`, which isolates nothing and says so.

A sandbox can also start a process that outlives one call (an MCP server
speaking over its pipes for a whole activation): :meth:`Sandbox.spawn`
returns a :class:`Spawned`, which its caller must close.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

WORKSPACE_INSIDE = "/workspace"
"""Where the agent's workspace appears inside a sandbox."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one run may use. ``None`` means no limit of that kind."""

    wall_seconds: float = 120.0
    cpu_seconds: int | None = 60
    memory_bytes: int | None = 1024 * 1024 * 1024
    processes: int | None = 128
    output_bytes: int = 64 * 1024
    # the largest file a command may write (RLIMIT_FSIZE); the workspace quota
    file_bytes: int | None = None

    def capped_by(self, ceiling: Limits) -> Limits:
        """These limits, none looser than ``ceiling``'s (the operator's)."""

        def low(mine: int | None, cap: int | None) -> int | None:
            return cap if mine is None else mine if cap is None else min(mine, cap)

        return Limits(
            wall_seconds=min(self.wall_seconds, ceiling.wall_seconds),
            cpu_seconds=low(self.cpu_seconds, ceiling.cpu_seconds),
            memory_bytes=low(self.memory_bytes, ceiling.memory_bytes),
            processes=low(self.processes, ceiling.processes),
            output_bytes=min(self.output_bytes, ceiling.output_bytes),
            file_bytes=low(self.file_bytes, ceiling.file_bytes),
        )


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a sandboxed command ended."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }
        if self.timed_out:
            out["timed_out"] = True
        return out


@dataclass(frozen=True, slots=True)
class Isolation:
    """What a sandbox can promise on this machine, for ``stead doctor``."""

    sandbox: str
    isolated: bool
    namespaces: tuple[str, ...] = ()
    limits: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())


class Sandbox(Protocol):
    """Runs commands for tools. Implementations keep no per-agent state."""

    name: str

    def isolation(self) -> Isolation:
        """What this sandbox gives on this machine."""
        ...

    def run(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
    ) -> RunResult:
        """Run ``argv`` with ``workspace`` as its working folder."""
        ...

    def spawn(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
        ro_paths: Sequence[str] = (),
    ) -> Spawned:
        """Start ``argv`` as a long-lived process with pipes on stdin, stdout
        and stderr, in its own session, under ``limits``' memory, process and
        file-size limits (not its times: it lives as long as its caller wants).
        ``ro_paths`` are host folders it may read besides the usual ones (a
        Python environment, say). The caller must :meth:`Spawned.close` it."""
        ...


class Spawned:
    """A long-lived process a sandbox started, and how to end it.

    ``proc`` has pipes on stdin, stdout and stderr and leads its own process
    group (it was started in a new session). :meth:`kill` only signals, so it
    is safe from any thread at any time; :meth:`close` also reaps the process,
    runs the sandbox's clean-up (removing a pids cgroup, say) and closes
    whatever pipes nobody else closed. Both may be repeated.
    """

    def __init__(
        self, proc: subprocess.Popen[bytes], cleanup: Callable[[], None] | None = None
    ) -> None:
        self.proc = proc
        self._cleanup = cleanup
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int:
        """The host pid of the process (and the id of its process group)."""
        return self.proc.pid

    def exit_code(self) -> int | None:
        """How the process ended (``-N`` for signal N), or ``None`` while it runs.

        Looked at without reaping it: until :meth:`close` reaps it, its pid
        (and so its process group id) cannot be taken by another process, so
        killing the group later can only reach what this process left.
        """
        if self.proc.returncode is not None:
            return self.proc.returncode
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already, by someone's wait()
            return self.proc.poll()
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def kill(self) -> None:
        """SIGKILL the process group now; nothing is waited for."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def close(self) -> None:
        """Kill the process group, reap it, clean up after it, close the pipes."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.kill()
        self.proc.wait()
        if self._cleanup is not None:
            self._cleanup()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def text(data: bytes, cap: int) -> str:
    """Decoded output, cut to ``cap`` bytes with a note of what was cut."""
    out = data[:cap].decode("utf-8", errors="replace")
    return out + (f"\n… [{len(data) - cap} more bytes]" if len(data) > cap else "")


def communicate(proc: subprocess.Popen[bytes], limits: Limits) -> RunResult:
    """Wait for a process started in its own session; kill its group on timeout."""
    try:
        stdout, stderr = proc.communicate(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return RunResult(
            None,
            text(stdout, limits.output_bytes),
            text(stderr, limits.output_bytes),
            timed_out=True,
        )
    return RunResult(
        proc.returncode, text(stdout, limits.output_bytes), text(stderr, limits.output_bytes)
    )


class Unsandboxed:
    """A plain subprocess in the workspace: no isolation at all.

    Used only when the operator opts in (``STEAD_UNSANDBOXED=1``) on a machine
    where no sandbox can be made. The environment is still scrubbed and the
    wall-time limit still kills the whole process group.
    """

    name = "unsandboxed"

    def isolation(self) -> Isolation:
        return Isolation(
            self.name,
            False,
            limits=("wall time",),
            notes=(
                "commands run as ordinary processes with the worker's "
                "privileges; chosen by STEAD_UNSANDBOXED=1",
            ),
        )

    def run(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
    ) -> RunResult:
        proc = subprocess.Popen(
            list(argv),
            cwd=workspace,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        return communicate(proc, limits)

    def spawn(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
        ro_paths: Sequence[str] = (),
    ) -> Spawned:
        """A plain process in the workspace: no limits, every path visible anyway."""
        proc = subprocess.Popen(
            list(argv),
            cwd=workspace,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        return Spawned(proc)
