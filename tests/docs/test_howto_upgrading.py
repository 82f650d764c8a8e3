"""The how-to on upgrading a store, followed on a store the reader already has."""

from __future__ import annotations

import shutil
from pathlib import Path

from .tutorial import HOW_TO, Reader

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_upgrading_a_store(reader: Reader, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "offline", tmp_path / "offline")
    made = reader.run("stead run offline/agent.yaml --quiet")
    assert made.code == 0, made.output
    reader.follow(HOW_TO / "upgrading-a-store.md")
    shown = reader.ran[-1].output
    assert "schema version" in shown and "made by stead" in shown, shown
