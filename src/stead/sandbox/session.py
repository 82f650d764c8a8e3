"""A sandbox session: one bubblewrap per activation, many commands in it.

Starting bubblewrap (namespaces, mounts, a pids cgroup, a launcher shell)
costs over ten milliseconds, far more than most commands a tool runs. A
session pays it once per activation: on its first run it starts one
bubblewrap, with the same mounts and namespaces as a one-shot run, whose
command is a small ``/bin/sh`` loop (:data:`HELPER`). Each later run is one
line sent to that loop, which runs the command in a subshell in
``/workspace`` under the run's ``ulimit``s with exactly the requested
variables, stdin from ``/dev/null`` and stdout/stderr on two long-lived pipes.

What the one-shot sandbox gets for free by exiting, the loop does after every
command: it SIGKILLs every other process in the sandbox's PID namespace
(``kill -1``; so nothing a command left in the background is alive when the
next one starts), empties ``/tmp`` and ``/dev/shm``, and only then answers
``done NONCE STATUS``. The nonce is random per run, so no line a command
writes can be taken for the end of a run. If the sandbox cannot be made clean
again, the answer is ``dirty`` and the session is thrown away.

A session serves one agent's workspace, and only runs that may share it:
runs with a network grant, runs whose environment carries secrets (the caller
asks for :meth:`SandboxSession.run_alone` then) and runs for another folder
go through a one-shot sandbox. A run past its wall time takes the whole
session down with it; the next run starts a fresh one. A session is used by
one thread (bubblewrap's ``--die-with-parent`` follows the thread that
started it) and must be closed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import secrets
import selectors
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar, cast

from . import seccomp
from .base import Isolation, Limits, RunResult, Sandbox, Spawned
from .bwrap import BwrapSandbox, _make_pids_cgroup, _remove_cgroup, file_blocks
from .sealed import PROBE, sealed_shell
from .select import select
from .watchdog import Guard
from .watchdog import guard as watchdog_guard

HELPER = (
    r"""nl='
'
"""
    + PROBE
    + r"""
clean() {
  i=0
  while set -- /proc/[0-9]*; [ $# -gt 1 ]; do
    kill -9 -1 2>/dev/null
    ( : )
    i=$((i + 1))
    [ $i -lt 20000 ] || return 1
  done
  for d in /tmp /dev/shm; do
    set -- $d/* $d/.[!.]* $d/..?*
    for f; do
      if [ -e "$f" ] || [ -h "$f" ]; then
        /bin/rm -rf -- "$@" 2>/dev/null || {
          /usr/bin/find "$@" -type d ! -perm -u=rwx -exec /bin/chmod u+rwx {} \; 2>/dev/null
          /bin/rm -rf -- "$@" 2>/dev/null
        } || return 1
        break
      fi
    done
  done
  return 0
}
trap '' INT QUIT TERM HUP
echo ready >&0
while read -r n t v u f c; do
  (
    trap - INT QUIT TERM HUP
    cd /workspace || exit 126
    [ "$t" = - ] || ulimit -t "$t" || exit 126
    [ "$v" = - ] || ulimit -v "$v" || exit 126
    [ "$u" = - ] || ulimit -u "$u" || exit 126
    [ "$f" = - ] || ulimit -f "$f" || exit 126
    eval "$c"
  ) </dev/null
  s=$?
  if clean; then echo "done $n $s" >&0; else echo "dirty $n $s" >&0; fi
done
"""
)
"""The loop inside the sandbox: the sandbox's pid 1, run by the execute-only
shell of :mod:`stead.sandbox.sealed` so that no command can read its memory or
take its descriptors, and (as an init) shielded by the kernel from every
signal its commands send. fd 0 is a socket: requests in, ``ready`` and
``done``/``dirty`` lines out (``exposed`` instead of ``ready`` if a child
could reach any process); fds 1 and 2 are the commands' stdout and stderr.
Every process but the loop is killed after each command and reaped (the
``( : )`` makes the shell wait, which reaps what was left to it as init);
only when the loop alone is left in ``/proc`` is the namespace clean."""

_INFRA_PROCESSES = 2
"""bubblewrap outside and the loop inside: the pids cgroup allows this many
on top of the run's own ``processes``."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_REQUEST = 16 * 1024
"""The loop's shell reads its request a byte at a time (about 1 µs a byte):
past this many characters of argv and environment, a one-shot run is faster."""


def _word(value: str) -> str:
    """``value`` as one shell word on one line: quoted pieces joined by ``$nl``."""
    return '"$nl"'.join("'" + piece.replace("'", "'\\''") + "'" for piece in value.split("\n"))


def _shareable(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether the loop can run this exactly, and quickly (else: one-shot)."""
    texts = [*argv, *env, *env.values()]
    return (
        bool(argv)
        and all(_NAME.match(k) for k in env)
        and not any("\0" in t for t in texts)
        and sum(map(len, texts)) <= _MAX_REQUEST
    )


@dataclass(slots=True)
class _Capture:
    """One output stream of a run: the first ``cap`` bytes kept, all counted."""

    cap: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, data: bytes) -> None:
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.total += len(data)

    def text(self) -> str:
        out = bytes(self.kept).decode("utf-8", errors="replace")
        cut = self.total - len(self.kept)
        return out + (f"\n… [{cut} more bytes]" if cut > 0 else "")


@dataclass(slots=True)
class _Live:
    """A running session's bubblewrap and the ends of its channels."""

    proc: subprocess.Popen[bytes]
    sock: socket.socket
    out: int
    err: int
    cgroup: Path | None
    selector: selectors.BaseSelector
    pending: bytearray = field(default_factory=bytearray)
    pids_max: str = ""
    guard: Guard | None = None


class _Died(Exception):
    """The loop went away (its socket closed) before answering."""


class _Exposed(Exception):
    """The loop found that a command could read it: the session is not safe here."""


class _Closeable(Protocol):
    def close(self) -> None: ...


K = TypeVar("K", bound=_Closeable)


class SandboxSession:
    """One agent's commands, in one long-lived bubblewrap per activation.

    ``sandbox`` is what one-shot runs use; ``None`` means the machine's,
    chosen at first use (raising :class:`~stead.errors.SandboxUnavailable`
    like :func:`~stead.sandbox.select.select`). Anything but the plain
    :class:`BwrapSandbox` (no sandbox, or a subclass that changes how a run
    works) gets every run delegated to it unchanged.
    """

    name = "session"

    def __init__(self, sandbox: Sandbox | None, workspace: Path) -> None:
        self._sandbox = sandbox
        self.workspace = workspace
        self._root: Path | None = None
        self._live: _Live | None = None
        # set when the loop cannot be sealed from its commands on this
        # machine: every run is then one-shot, slower but as isolated
        self._unshared = sealed_shell() is None
        self._kept: dict[str, _Closeable] = {}
        # when the lease this session works under runs out (time.monotonic);
        # the watchdog kills every bubblewrap of the session then
        self._deadline: float | None = None
        self._guards: list[Guard] = []
        self._guards_lock = threading.Lock()

    def underlying(self) -> Sandbox:
        """The sandbox for runs that must not share the session."""
        if self._sandbox is None:
            self._sandbox = select()
        return self._sandbox

    def isolation(self) -> Isolation:
        found = self.underlying().isolation()
        if not self._unshared:
            return found
        why = "commands cannot share a sandbox here (its loop could not be sealed): one-shot"
        return dataclasses.replace(found, notes=(*found.notes, why))

    def hold_until(self, deadline: float | None) -> None:
        """Everything this session runs is killed at ``deadline``
        (``time.monotonic()``) unless this is called again with a later one.

        The caller holds a lease and moves the deadline on each time it renews
        it; a caller that cannot (a stopped worker) leaves the deadline where
        it was, and the watchdog (:mod:`stead.sandbox.watchdog`), a process
        of its own, kills the session's sandboxes then, before another worker
        may take the agent over. Safe from any thread.
        """
        with self._guards_lock:
            self._deadline = deadline
            self._guards = [g for g in self._guards if not g.dropped]
            guards = list(self._guards)
        for g in guards:
            g.hold(deadline)

    def _watch(self, pid: int, cgroup: Path | None) -> Guard:
        with self._guards_lock:
            found = watchdog_guard(pid, cgroup, self._deadline)
            self._guards.append(found)
        return found

    def _watched(self, sandbox: Sandbox) -> dict[str, object]:
        """The keyword that has a plain bubblewrap tell the watchdog of what it starts."""
        return {"watch": self._watch} if type(sandbox) is BwrapSandbox else {}

    @property
    def pid(self) -> int | None:
        """The host pid of the session's bubblewrap while one is running."""
        return self._live.proc.pid if self._live is not None else None

    def run(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
    ) -> RunResult:
        sandbox = self.underlying()
        if self._root is None:
            self._root = self.workspace.resolve()
        if (
            type(sandbox) is not BwrapSandbox
            or self._unshared
            or network
            or not _shareable(argv, env)
            or workspace.resolve() != self._root
        ):
            return sandbox.run(
                argv, workspace, env=env, limits=limits, network=network, **self._watched(sandbox)
            )
        return self._run(sandbox, argv, env, limits)

    def run_alone(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
    ) -> RunResult:
        """A run in a sandbox of its own (a command given secrets), held to the
        lease like every run of the session (:meth:`hold_until`)."""
        sandbox = self.underlying()
        return sandbox.run(
            argv, workspace, env=env, limits=limits, network=network, **self._watched(sandbox)
        )

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
        """A long-lived process never shares the session: it gets a sandbox of its own."""
        sandbox = self.underlying()
        return sandbox.spawn(
            argv,
            workspace,
            env=env,
            limits=limits,
            network=network,
            ro_paths=ro_paths,
            **self._watched(sandbox),
        )

    def keep(self, key: str, make: Callable[[], K]) -> K:
        """What tools keep for the rest of the session under ``key`` (an activation's
        MCP servers): made at the first ask, closed when the session is closed or
        killed, so nothing of it outlives the activation or a lost lease."""
        found = self._kept.get(key)
        if found is None:
            found = self._kept[key] = make()
        return cast(K, found)

    def _drop_kept(self) -> None:
        kept, self._kept = list(self._kept.values()), {}
        for thing in kept:
            thing.close()

    def kill(self) -> None:
        """Kill the session's processes now; safe from another thread.

        For a worker that has lost its lease: the command running in the
        session dies at once, so nothing of it writes to the workspace after
        another worker has the agent. The thread running the command sees the
        session end and reports the run failed; :meth:`close` still tidies up.
        What tools kept (:meth:`keep`) is closed too.
        """
        self._drop_kept()
        live = self._live
        if live is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(live.proc.pid, signal.SIGKILL)
        if live.cgroup is not None:
            with contextlib.suppress(OSError, ValueError):
                for pid in (live.cgroup / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)

    def close(self) -> None:
        """End the session's processes and remove its cgroup; safe to repeat."""
        self._drop_kept()
        self._end(_Capture(0), _Capture(0), graceful=True)

    # -- inside ---------------------------------------------------------------

    def _run(
        self, sandbox: BwrapSandbox, argv: Sequence[str], env: Mapping[str, str], limits: Limits
    ) -> RunResult:
        deadline = time.monotonic() + limits.wall_seconds
        out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
        if self._live is not None and self._live.proc.poll() is not None:
            self.close()  # it died between runs: start again
        answer = None
        try:
            live = self._live = self._live or self._start(sandbox, deadline, err)
            if live is not None:  # else the start itself ran out of time
                nonce = secrets.token_hex(8)
                live.sock.settimeout(max(deadline - time.monotonic(), 0.001))
                live.sock.sendall(self._request(live, nonce, argv, env, limits))
                answer = _pump(live, deadline, nonce, out, err)
        except TimeoutError:
            pass  # the request itself could not be sent in time
        except _Exposed:
            self._unshared = True
            return sandbox.run(argv, self.workspace, env=env, limits=limits, watch=self._watch)
        except (_Died, OSError) as exc:
            self._end(out, err)
            note = (
                f"[stead: the sandbox ended before the command finished ({exc}); "
                "the next command starts in a fresh one]"
            )
            return RunResult(None, out.text(), "\n".join(filter(None, [err.text(), note])))
        if answer is None or live is None:
            self._end(out, err)
            return RunResult(None, out.text(), err.text(), timed_out=True)
        _drain(live, out, err)
        if answer[0] == "dirty":
            self.close()  # something could not be removed: the next run starts clean
        return RunResult(int(answer[2]), out.text(), err.text())

    def _end(self, out: _Capture, err: _Capture, graceful: bool = False) -> None:
        """Kill the session, keeping what its pipes still hold; remove its cgroup.

        SIGKILL reaches bubblewrap outside; its init inside dies with it
        (``--die-with-parent``), and with the init the whole PID namespace.
        Between runs (``graceful``) the loop is first asked to end by closing
        its input, which lets bubblewrap exit at once rather than have the
        kernel tear it down while the cgroup waits to be emptied.
        """
        live, self._live = self._live, None
        if live is None:
            return
        if graceful:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                live.sock.shutdown(socket.SHUT_WR)
                live.proc.wait(timeout=0.5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(live.proc.pid, signal.SIGKILL)
        if live.guard is not None:
            live.guard.drop()
        live.proc.wait()
        if live.cgroup is not None:
            _remove_cgroup(live.cgroup)  # and kills anything still in it
        _drain(live, out, err)
        live.selector.close()
        live.sock.close()
        for fd in (live.out, live.err):
            os.close(fd)

    def _start(self, sandbox: BwrapSandbox, deadline: float, err: _Capture) -> _Live | None:
        """Start bubblewrap with the loop; wait for its ``ready``.

        Raises :class:`_Exposed` if the loop's own check finds that a
        command could reach it.
        """
        assert self._root is not None
        filter_fd = seccomp.filter_fd()
        try:
            inner = sandbox.command([], self._root, {}, False, seccomp_fd=filter_fd, loop=HELPER)
        except BaseException:
            if filter_fd is not None:
                os.close(filter_fd)
            raise
        cgroup = _make_pids_cgroup(4_194_304)  # the real maximum is set per run
        prelude = f"echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))} && " if cgroup else ""
        ours, theirs = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", prelude + "exec " + shlex.join(inner)],
                stdin=theirs.fileno(),
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin"},
                # the launcher shell would put the worker's folder in
                # bubblewrap's environment as PWD
                cwd="/",
                pass_fds=() if filter_fd is None else (filter_fd,),
            )
        except BaseException:
            ours.close()
            os.close(out_r)
            os.close(err_r)
            if cgroup is not None:
                _remove_cgroup(cgroup)
            raise
        finally:
            theirs.close()
            os.close(out_w)
            os.close(err_w)
            if filter_fd is not None:
                os.close(filter_fd)
        selector = selectors.DefaultSelector()
        for fd in (ours.fileno(), out_r, err_r):
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        live = _Live(
            proc, ours, out_r, err_r, cgroup, selector, guard=self._watch(proc.pid, cgroup)
        )
        died = False
        try:
            ready = _pump(live, deadline, None, _Capture(0), err)
        except _Died:
            ready, died = None, True
        if ready == ["ready"]:
            return live
        self._live = live
        self._end(_Capture(0), err)  # keeping what bubblewrap said on stderr
        if ready == ["exposed"]:
            raise _Exposed()
        if died:
            raise _Died("bubblewrap could not start it")
        return None

    def _request(
        self,
        live: _Live,
        nonce: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        limits: Limits,
    ) -> bytes:
        """One line: nonce, ulimits (``-`` for none), then the shell text to eval."""
        procs = limits.processes
        if live.cgroup is not None:
            wanted = "max" if procs is None else str(procs + _INFRA_PROCESSES)
            if wanted != live.pids_max:
                (live.cgroup / "pids.max").write_text(wanted)
                live.pids_max = wanted
            procs = None
        fields = [
            nonce,
            "-" if limits.cpu_seconds is None else str(limits.cpu_seconds),
            "-" if limits.memory_bytes is None else str(limits.memory_bytes // 1024),
            "-" if procs is None else str(procs),
            "-" if limits.file_bytes is None else str(file_blocks(limits.file_bytes)),
        ]
        # argv is set aside first: a variable named like one of the loop's
        # (``nl``, say) must not change how later words expand
        text = "set -- " + " ".join(_word(a) for a in argv) + "; unset PWD OLDPWD; "
        if env:
            text += "export " + " ".join(_word(f"{k}={v}") for k, v in sorted(env.items())) + "; "
        text += 'exec "$@"'
        return (" ".join(fields) + " " + text + "\n").encode("utf-8", "surrogateescape")


def _pump(
    live: _Live, deadline: float, nonce: str | None, out: _Capture, err: _Capture
) -> list[str] | None:
    """Collect output until the loop's answer for ``nonce`` (``ready`` if None).

    Returns the answer's words, or None when ``deadline`` passes first.
    Lines that answer nothing asked (a command cannot know the nonce) are
    ignored.
    """
    while True:
        while b"\n" in live.pending:
            line, _, rest = bytes(live.pending).partition(b"\n")
            live.pending[:] = rest
            words = line.decode("ascii", errors="replace").split()
            if nonce is None and words in (["ready"], ["exposed"]):
                return words
            if len(words) == 3 and words[0] in ("done", "dirty") and words[1] == nonce:
                return words
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        for key, _ in live.selector.select(remaining):
            if key.fd == live.sock.fileno():
                try:
                    data = live.sock.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:
                    raise _Died(str(exc)) from None
                if not data:
                    raise _Died("its helper exited")
                live.pending += data
            else:
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    live.selector.unregister(key.fd)
                    continue
                (out if key.fd == live.out else err).add(data)


def _drain(live: _Live, out: _Capture, err: _Capture) -> None:
    """Take what the pipes still hold, without waiting for more."""
    for fd, capture in ((live.out, out), (live.err, err)):
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:  # nothing more for now
                break
            if not data:
                break
            capture.add(data)
