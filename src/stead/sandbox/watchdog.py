"""A sandbox ends when its lease does, even if its worker cannot act.

A worker kills its sandbox when its heartbeat finds the lease taken over;
but the heartbeat is a thread of the worker, and a worker that is stopped
(``SIGSTOP``, a frozen VM, a debugger) runs no thread at all. Its sandboxed
command then writes on into a workspace that another worker has taken over
and rolled back. So the deadline is kept outside the worker: one small
process per worker, the *watchdog*, holds a pidfd of every bubblewrap the
worker starts, each with the moment its lease runs out (``time.monotonic``,
which every process of the host shares), and kills it then unless the
worker has moved the moment on. The worker moves it whenever it renews the
lease; a worker that is stopped moves nothing, and its sandboxes die just
before another worker may take the agent.

A pidfd names one process exactly, however late the signal comes (a pid
could have been reused); it is handed over on a ``SOCK_SEQPACKET`` socket,
whose messages keep their bounds. The watchdog lives in a session of its
own, so a signal to the worker's process group does not stop it; when the
worker goes away (its end of the socket closes) the watchdog kills every
sandbox it still holds and exits. It imports nothing of stead and starts
in a few milliseconds, once per worker process, at the first sandbox.

Where it cannot run (no pidfds: Linux before 5.3), sandboxes are tied to
their worker's liveness only, and :func:`available` says so for
``stead doctor``.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

_SCRIPT = r"""
import os, select, signal, socket, time
channel = socket.socket(fileno=0)
held = {}

def kill(key):
    pidfd, cgroup, _ = held.pop(key)
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    if cgroup != "-":
        try:
            with open(os.path.join(cgroup, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            pass
    os.close(pidfd)

while True:
    now = time.monotonic()
    for key in [k for k, (_, _, d) in held.items() if d is not None and d <= now]:
        kill(key)
    waits = [d - now for (_, _, d) in held.values() if d is not None]
    ready, _, _ = select.select([channel], [], [], max(min(waits), 0) if waits else None)
    if not ready:
        continue
    try:
        data, fds, _, _ = socket.recv_fds(channel, 4096, 1)
    except OSError:
        data, fds = b"", []
    if not data:
        for key in list(held):
            kill(key)
        break
    words = data.decode().split(" ", 3)
    deadline = float(words[2]) if len(words) > 2 and words[2] != "-" else None
    if words[0] == "arm" and fds:
        held[words[1]] = (fds[0], words[3], deadline)
        continue
    for fd in fds:
        os.close(fd)
    if words[0] == "hold" and words[1] in held:
        pidfd, cgroup, _ = held[words[1]]
        held[words[1]] = (pidfd, cgroup, deadline)
    elif words[0] == "drop" and words[1] in held:
        os.close(held.pop(words[1])[0])
"""


class Guard:
    """One sandbox process the watchdog holds; :meth:`drop` before reaping it."""

    def __init__(self, watchdog: Watchdog | None, key: str) -> None:
        self._watchdog = watchdog
        self._key = key
        self._dropped = False

    def hold(self, deadline: float | None) -> None:
        """Kill the process at ``deadline`` (``time.monotonic()``; None: never)."""
        if self._watchdog is not None and not self._dropped:
            self._watchdog.send(f"hold {self._key} {_when(deadline)}")

    @property
    def dropped(self) -> bool:
        return self._dropped

    def drop(self) -> None:
        """The process is the caller's to end: the watchdog lets it go."""
        if self._watchdog is not None and not self._dropped:
            self._dropped = True
            self._watchdog.send(f"drop {self._key}")


class Watchdog:
    """The worker's watchdog process and its end of the channel."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _SCRIPT],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                cwd="/",
            )
        finally:
            theirs.close()
        self._channel = ours
        self._lock = threading.Lock()
        self._keys = itertools.count()
        atexit.register(self.close)

    def close(self) -> None:
        """End the watchdog (at the worker's exit): it kills what it still holds."""
        with self._lock:
            self._channel.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=2)

    def guard(self, pid: int, cgroup: Path | None, deadline: float | None) -> Guard:
        """Hold ``pid`` (the caller's child, not yet reaped) until ``deadline``."""
        key = str(next(self._keys))
        pidfd = os.pidfd_open(pid)
        try:
            message = f"arm {key} {_when(deadline)} {cgroup or '-'}"
            with self._lock:
                socket.send_fds(self._channel, [message.encode()], [pidfd])
        finally:
            os.close(pidfd)
        return Guard(self, key)

    def send(self, message: str) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._channel.send(message.encode())

    @property
    def pid(self) -> int:
        return self._proc.pid


def _when(deadline: float | None) -> str:
    return "-" if deadline is None else repr(deadline)


_lock = threading.Lock()
_current: Watchdog | None = None
_failed: str | None = None


def available() -> tuple[bool, str]:
    """Whether sandboxes can be held to their lease here, and if not why."""
    if not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds"):
        return False, "this Python has no pidfds: a stopped worker's sandbox runs on"
    return (_failed is None), (_failed or "")


def guard(pid: int, cgroup: Path | None, deadline: float | None) -> Guard:
    """Hold ``pid`` in this process's watchdog (started at the first call).

    Never raises: where no watchdog can run, the guard does nothing and
    :func:`available` says why.
    """
    global _current, _failed
    with _lock:
        if _current is not None and _current._proc.poll() is not None:
            _current = None  # it died (killed by hand): start another
        if _current is None and _failed is None:
            try:
                _current = Watchdog()
            except OSError as exc:
                _failed = f"the sandbox watchdog could not start ({exc})"
        watchdog = _current
    if watchdog is None:
        return Guard(None, "")
    try:
        return watchdog.guard(pid, cgroup, deadline)
    except OSError as exc:  # no pidfd_open in this kernel
        with _lock:
            _failed = f"the sandbox watchdog cannot hold processes here ({exc})"
        return Guard(None, "")
