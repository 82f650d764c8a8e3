"""Who holds a lease: this worker's identity, and whether a holder on this host is dead.

A lease's owner is ``host:pid:nonce``. A worker may take over a live lease
only when its holder is a process on the same host that no longer exists (or
is a zombie), so a SIGKILLed worker's agent resumes at once while a holder on
another host is waited out.
"""

from __future__ import annotations

import os
import socket


def this_worker() -> str:
    """A worker identity: host and process id, which recovery uses to spot dead holders."""
    return f"{socket.gethostname()}:{os.getpid()}"


def holder_is_dead_here(owner: str) -> bool:
    """True when ``owner`` names a process on this host that no longer exists."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
