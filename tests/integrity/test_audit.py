"""Auditing an agent: chain, chain end, and stored state against the journal."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from stead import FakeClock, Runtime, parse_spec
from stead.integrity.audit import audit
from stead.store.codec import unpack
from stead.store.sqlite import SqliteStore


@pytest.fixture
def finished(tmp_path: Path) -> tuple[Runtime, str, Path]:
    (tmp_path / "s.yaml").write_text(
        "- {remember: {a: 1}}\n- {remember: {b: 2}}\n- {finish: done}\n"
    )
    db = tmp_path / "s.db"
    rt = Runtime(SqliteStore(db), tmp_path / "data", clock=FakeClock())
    agent = rt.create(parse_spec({"name": "a", "model": "scripted:s.yaml"}, tmp_path)).agent_id
    rt.run(agent)
    return rt, agent, db


def test_an_untouched_agent_passes(finished: tuple[Runtime, str, Path]) -> None:
    rt, agent, _ = finished
    report = audit(rt.store, agent)
    state = rt.store.load_state(agent)
    assert report.ok and report.events == state.version and report.head_hash == state.head_hash
    rt.close()


def test_an_edited_state_row_is_reported(finished: tuple[Runtime, str, Path]) -> None:
    rt, agent, db = finished
    with sqlite3.connect(db) as con:
        (text,) = con.execute("SELECT state FROM agents WHERE agent_id = ?", (agent,)).fetchone()
        state = json.loads(unpack(text, "the state row"))
        state["memory"]["a"] = 99
        con.execute("UPDATE agents SET state = ? WHERE agent_id = ?", (json.dumps(state), agent))
    report = audit(rt.store, agent)
    assert not report.ok and report.bad_event is None
    assert "differs from the journal in memory" in report.reason
    rt.close()


def test_a_cut_off_journal_is_reported(finished: tuple[Runtime, str, Path]) -> None:
    rt, agent, db = finished
    version = rt.store.load_state(agent).version
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM events WHERE agent_id = ? AND seq = ?", (agent, version))
    report = audit(rt.store, agent)
    assert not report.ok and report.bad_event == version
    assert f"events from {version} on are missing" in report.reason
    rt.close()
