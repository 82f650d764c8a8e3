"""An execute-only copy of the system shell: every sandbox's pid 1.

A sandbox's pid 1 (a session's loop, or the small init a one-shot run or a
spawned server gets) and the commands it runs share one user inside it.
The kernel lets a process of the same user read another's memory
(``/proc/PID/mem``), list and take its file descriptors (``/proc/PID/fd``,
``pidfd_getfd``) and trace it, unless the other is *non-dumpable*; without
that, a command could take the loop's control socket and answer for it.

A shell cannot make itself non-dumpable, but the kernel does it for any
process that executes a program it cannot read (``prctl(2)``,
``PR_SET_DUMPABLE``). So pid 1 runs from a copy of ``/bin/sh`` whose mode
is ``0111`` (execute, no read), bound into the sandbox read-only at
:data:`INSIDE`: the sandbox's user, holding no capabilities, cannot read it,
so pid 1 is non-dumpable and every one of those doors is shut to the
commands beneath it (each of which executes a readable program and so is
dumpable, harmlessly). It replaces bubblewrap's own init, which was
dumpable, held the session's control socket, and as an init outlived every
``kill -9 -1``: a command that traced it made it answer for the loop. The
seccomp filter (:mod:`stead.sandbox.seccomp`) shuts the same doors a second
time. A session checks at its start that no process in the sandbox can be
read (:data:`PROBE`) and shares nothing if that does not hold.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

INSIDE = "/run/stead/sh"
"""Where the copy is bound inside the sandbox. Named ``sh`` so that a bash
copy runs in POSIX mode, as ``/bin/sh`` does (``ulimit -f`` in 512-byte
blocks, say)."""

PROBE = (
    "for p in /proc/[0-9]*; do "
    'if /bin/cat "$p/environ" >/dev/null 2>&1; then echo exposed >&0; exit 1; fi; '
    "done"
)
"""The loop's first line: for every process in the sandbox (the loop itself,
and anything else a command could find there), a child (``/bin/cat``, a
readable program, started after the list was taken) reads its ``/proc``
entry that needs the same access as its memory and descriptors; if it can
read any, a command could reach that process, and the loop says so instead
of ``ready``."""


@cache
def sealed_shell() -> Path | None:
    """The execute-only copy of the shell, made once per process.

    ``None`` when no copy can be made (no ``/bin/sh``, no writable temporary
    folder); the session then runs every command one-shot.
    """
    source = os.path.realpath("/bin/sh")
    try:
        folder = Path(tempfile.mkdtemp(prefix="stead-loop-"))
    except OSError:
        return None
    atexit.register(shutil.rmtree, folder, True)
    target = folder / "sh"
    try:
        shutil.copyfile(source, target)
        os.chmod(target, 0o111)
    except OSError:
        return None
    return target
