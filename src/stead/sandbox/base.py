"""The sandbox seam: run one command, isolated, with limits.

A :class:`Sandbox` runs an argument vector with the agent's workspace as the
only writable place, a scrubbed environment, and the :class:`Limits` given,
and reports what happened as a :class:`RunResult`. :func:`stead.sandbox.select`
picks the real one (bubblewrap) or, only when the operator opts in,
:class:`Unsandboxed`, which isolates nothing and says so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
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
