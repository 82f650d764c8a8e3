"""The files of a SQLite store this process holds open, kept from every other open.

SQLite's locks are POSIX advisory locks, which belong to a process and a file:
closing *any* descriptor of the file in the process drops all of the process's
locks on it, even those its SQLite connection took. A server that copies its
own ``stead.db`` (seeding a workspace from the data folder), reads it as a spec
or an archive, or writes an export over it, silently stops holding its locks;
the next ``stead`` command in another process then believes itself the last
connection, checkpoints and deletes the WAL the server still writes to, and
everything the server writes after is lost.

So :class:`~stead.store.sqlite.SqliteStore` registers the database it opens
here (:func:`hold`), and everything that opens a host file by a name it was
given or found by walking a folder asks first (:func:`refuse_held`,
:func:`held_files`): the database, its ``-wal``, ``-shm`` and ``-journal``, by
their inode, so a link or another path to them is caught too. Only the
store's own connection ever opens them.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

from .errors import UsageError

SIDECARS = ("", "-wal", "-shm", "-journal")
"""The database file and the files SQLite keeps beside it."""
SQLITE_HEADER = b"SQLite format 3\x00"
"""The first bytes of every SQLite database: what a held one would be read to show."""

_held: Counter[str] = Counter()
_lock = threading.Lock()


def hold(path: str | Path) -> str:
    """Record that this process has the SQLite database at ``path`` open; the name to
    :func:`release` it by (resolved now, whatever the current folder is later), or ""
    for a database in memory, which has no files."""
    if str(path) == ":memory:":
        return ""
    real = os.path.realpath(path)
    with _lock:
        _held[real] += 1
    return real


def release(real: str) -> str:
    """Record that one connection to the database :func:`hold` named ``real`` was
    closed (nothing for ""); "", what the connection holds from then on."""
    with _lock:
        if real in _held:
            _held[real] -= 1
            if _held[real] <= 0:
                del _held[real]
    return ""


def held_files() -> frozenset[tuple[int, int]]:
    """The (device, inode) of every file of every store this process holds, now: the
    ``-wal`` and ``-shm`` come and go, so they are looked up each time."""
    with _lock:
        paths = list(_held)
    found = set()
    for path in paths:
        for suffix in SIDECARS:
            try:
                st = os.stat(path + suffix)
            except OSError:
                continue
            found.add((st.st_dev, st.st_ino))
    return frozenset(found)


def is_held(path: str | Path, held: frozenset[tuple[int, int]] | None = None) -> bool:
    """Whether ``path`` (a link followed) is a file of a store this process holds."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    return (st.st_dev, st.st_ino) in (held_files() if held is None else held)


def refuse_held(
    path: str | Path, what: str, held: frozenset[tuple[int, int]] | None = None
) -> None:
    """Refuse, before it is opened, a ``path`` that is one of the held store's files
    (``held``: :func:`held_files`, when many paths are asked about at once)."""
    if is_held(path, held):
        raise UsageError(
            f"{what} {path} is a file of the store this process has open; stead never "
            "opens its own store but through its database connection (doing so would "
            "drop the store's locks and lose what it writes next): name another file"
        )
