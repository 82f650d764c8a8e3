"""Archives written by every format version stay readable (``tests/golden/archive_v*.stead``).

The files were written by ``python -m tests.snapshots.make_golden`` when their version
was current, and are never regenerated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stead import FakeClock, Kind
from stead.snapshots.archive import read_archive

from ..governance.agents import runtime_at

GOLDEN = Path(__file__).parent.parent / "golden"


@pytest.mark.parametrize("name", ["archive_v1.stead"])
def test_a_golden_archive_reads_verifies_and_imports(tmp_path: Path, name: str) -> None:
    archive = read_archive(GOLDEN / name)
    assert archive.header["format"] == "stead-archive" and archive.header["move"] is False
    assert archive.events[0].kind == Kind.AGENT_CREATED
    assert archive.state.status == "waiting" and archive.state.memory == {"stage": "deployed"}
    assert archive.header["head_hash"] == archive.state.head_hash

    rt = runtime_at(tmp_path, FakeClock())
    state = rt.import_archive(GOLDEN / name)
    assert state.origin is not None
    assert state.origin["agent_id"] == archive.header["agent"]["agent_id"]
    assert state.origin["archive_id"] == archive.archive_id
    assert state.public_key != archive.header["public_key"]
    ws = rt.workspace(state.agent_id, "default").root
    assert (ws / "plan" / "steps.md").read_text() == "ship it\n" * 50
    # the origin's whole journal is kept, by content, for whoever audits the import
    journal = rt.blobs("default").get(state.origin["journal_blob"])
    assert journal.count(b"\n") == len(archive.events)
