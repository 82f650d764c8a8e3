"""Export an agent with ``--move`` and die the moment the archive is about to be published.

``python move_main.py DB DATA_DIR VAULT_KEY_HEX AGENT_ID ARCHIVE`` opens a
runtime on the SQLite store ``DB`` and exports ``AGENT_ID`` to ``ARCHIVE`` as a
move, with ``Path.replace`` patched so that renaming the finished temporary
file into place kills this process with SIGKILL instead. That is the one
instant where the move is committed and the archive is not yet at its name.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from stead import Runtime
from stead.store.sqlite import SqliteStore


def _die_on_publish(self: Path, target: str | os.PathLike[str]) -> Path:
    if self.name.endswith(".partial"):
        os.kill(os.getpid(), signal.SIGKILL)
    return _replace(self, target)


_replace = Path.replace


def main(db: str, data_dir: str, key_hex: str, agent_id: str, archive: str) -> int:
    Path.replace = _die_on_publish  # type: ignore[method-assign]
    rt = Runtime(SqliteStore(db), data_dir, secret_key=bytes.fromhex(key_hex))
    rt.person = lambda: "alice@test"  # type: ignore[method-assign]
    rt.export(agent_id, Path(archive), move=True)
    return 0  # not reached: the rename kills the process


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
