"""The backups how-to, followed as an operator would, with SQLite and a folder of blobs.

After the page has backed up, restored and exported, the test reads the stores: the
backup holds the agent, the restored store verifies, and the archive's import is a
new agent with the same workspace.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from .tutorial import HOW_TO, Reader


def test_backups(reader: Reader, tmp_path: Path) -> None:
    reader.follow(HOW_TO / "backups.md")
    with sqlite3.connect(tmp_path / "backup" / "stead.db") as db:
        (rows,) = db.execute("SELECT count(*) FROM events WHERE agent_id = 'notes'").fetchone()
    assert rows == 12  # the whole journal, copied while the store was open
    assert any(p.is_file() for p in (tmp_path / "backup" / "blobs").rglob("*"))

    shown = json.loads(reader.run("stead --json show notes").output)
    assert shown["status"] == "completed" and "notes.md" in shown["manifest"]
    (imported,) = json.loads(
        reader.run("stead --store sqlite:///elsewhere/stead.db --json ls").output
    )
    assert imported["name"] == "notes" and imported["agent_id"] != "notes"
    copy = reader.run(
        f"stead --store sqlite:///elsewhere/stead.db --json show {imported['agent_id']}"
    )
    assert json.loads(copy.output)["manifest"]["notes.md"] == shown["manifest"]["notes.md"]
