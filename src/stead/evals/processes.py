"""Starting eval workers (:mod:`stead.evals.worker`) and reading what they say.

Each worker is a real process. Its CPU time is read from the kernel when it is
reaped (``wait4``), so a cell's cost is its own even while other cells run in
parallel threads of the same eval.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class WorkerRun:
    """What one worker process did."""

    said: list[dict[str, Any]] = field(default_factory=list)
    held: dict[str, Any] | None = None
    killed: bool = False
    timed_out: bool = False
    exit_code: int | None = None
    cpu_seconds: float = 0.0
    log: Path | None = None

    @property
    def last(self) -> dict[str, Any]:
        """The worker's closing line (its agent's status), or empty if it had none."""
        ends = [s for s in self.said if "status" in s]
        return ends[-1] if ends else {}

    def failure(self) -> str | None:
        """Why the worker ended badly (not by the eval's SIGKILL), or None."""
        if self.killed:
            return None
        if self.timed_out:
            return "the worker ran past the eval's time limit and was killed"
        if self.exit_code != 0 or not self.last:
            tail = _tail(self.log) if self.log else ""
            return f"the worker exited with {self.exit_code}: {tail}".strip()
        return None


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(text.strip().splitlines()[-lines:])


def run_worker(
    args: list[str],
    env: Mapping[str, str],
    log: Path,
    timeout: float,
    on_held: Callable[[dict[str, Any], Callable[[], None], Callable[[], None]], bool] | None = None,
) -> WorkerRun:
    """Run one worker to its end. When it says it is held, ``on_held(held, kill, go)``
    decides: it calls ``kill()`` (SIGKILL) or ``go()`` (let it run on), and returns
    whether the worker was killed."""
    run = WorkerRun(log=log)
    # the worker speaks on a pipe of its own (its stdout, where tools print, goes to the
    # log) and is let go on another (a tool reading stdin reads nothing meant for it)
    said, to_eval = os.pipe()
    from_eval, released = os.pipe()
    channels = ["--say-fd", str(to_eval), "--go-fd", str(from_eval)]
    try:
        with open(log, "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "stead.evals.worker", *args, *channels],
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                pass_fds=(to_eval, from_eval),
            )
    finally:
        os.close(to_eval)
        os.close(from_eval)
    lines = os.fdopen(said, "rb")
    go_line = os.fdopen(released, "wb")

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)

    def go() -> None:
        with contextlib.suppress(BrokenPipeError):
            go_line.write(b"go\n")
            go_line.flush()

    def overtime() -> None:
        run.timed_out = True
        kill()

    timer = threading.Timer(timeout, overtime)
    timer.daemon = True
    timer.start()
    try:
        for raw in lines:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict):
                continue
            run.said.append(line)
            if "held" in line and run.held is None:
                run.held = line["held"]
                if on_held is None:
                    go()
                else:
                    run.killed = on_held(line["held"], kill, go)
    except BaseException:
        kill()  # a held worker waits for its go for ever: never leave one behind
        raise
    finally:
        timer.cancel()
        # reaped here, not by Popen, so the kernel's account of its CPU time is read
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(BrokenPipeError):
            go_line.close()
        lines.close()
    run.exit_code = proc.returncode
    run.cpu_seconds = usage.ru_utime + usage.ru_stime
    return run
