"""Who holds a lease: this worker's identity, and whether a holder on this host is dead.

A lease's owner is ``host:pid:nonce``. A worker may take over a live lease
only when its holder is a process on the same host that no longer exists (or
is a zombie), so a SIGKILLed worker's agent resumes at once while a holder on
another host is waited out.
"""

from __future__ import annotations

import getpass
import os
import socket

from ..errors import StaleEpoch
from ..store.base import Lease, Store


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


def ensure_held(store: Store, lease: Lease) -> None:
    """Raise :class:`~stead.errors.StaleEpoch` unless ``lease`` is still the agent's.

    A tool calls it (``ctx.check_lease()``) just before an effect that must not
    happen twice: a worker that was paused past its lease and resumed learns
    here that another worker has taken the agent over, instead of acting.
    """
    current = store.get_lease(lease.agent_id)
    if current is None or current.epoch != lease.epoch or current.owner != lease.owner:
        raise StaleEpoch(
            f"this worker no longer holds agent {lease.agent_id}'s lease (epoch "
            f"{lease.epoch}); another worker has taken it over, so this call must not act"
        )


def person() -> str:
    """Who is at the keyboard: the operating-system user at this host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{os.uname().nodename}"
