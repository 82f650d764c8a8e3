"""An execute-only copy of the system shell, for the loop of a sandbox session.

A session's loop and the commands it runs share one user inside the sandbox.
The kernel lets a process of the same user read another's memory
(``/proc/PID/mem``), list and take its file descriptors (``/proc/PID/fd``,
``pidfd_getfd``) and trace it, unless the other is *non-dumpable*; without
that, a command could take the loop's control socket and answer for it.

A shell cannot make itself non-dumpable, but the kernel does it for any
process that executes a program it cannot read (``prctl(2)``,
``PR_SET_DUMPABLE``). So the loop runs from a copy of ``/bin/sh`` whose mode
is ``0111`` (execute, no read), bound into the sandbox read-only: the
sandbox's user, holding no capabilities, cannot read it, so the loop is
non-dumpable and every one of those doors is shut to the commands it runs
(each of which executes a readable program and so is dumpable, harmlessly).
The session checks this at its start (:data:`PROBE`) and shares nothing if
it does not hold.
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

PROBE = 'if /bin/cat "/proc/$$/environ" >/dev/null 2>&1; then echo exposed >&0; exit 1; fi'
"""The loop's first line: a child (``/bin/cat``, a readable program) reads the
loop's ``/proc`` entry that needs the same access as its memory and
descriptors; if it can, the loop is reachable and says so instead of
``ready``."""


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
