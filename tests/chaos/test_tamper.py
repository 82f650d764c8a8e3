"""Tamper evidence: change stored bytes behind stead's back; `audit verify` must say where.

An agent is run to completion by the real command line, then its journal is
edited with a separate SQLite connection, the way someone with access to the
database file could, and ``stead audit verify`` is run as a subprocess.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stead.store.codec import unpack

from .cli_helpers import EXIT_COMPLETED, EXIT_FAILED, Cli, write_spec

pytestmark = pytest.mark.chaos

AGENT = "ag_tamper"
SCRIPT: list[Any] = [
    {"tool": "write_file", "args": {"path": "notes.txt", "content": "hello, auditor\n"}},
    {"tool": "append_idempotent", "args": {"n": 7}},
    {"remember": {"checked": "yes"}},
    {"finish": "all done"},
]


@pytest.fixture(scope="module")
def finished_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one agent that ran to completion through the CLI."""
    cli = Cli(tmp_path_factory.mktemp("tamper-source"))
    spec = write_spec(cli.root / "agent", SCRIPT, name="tamper")
    proc = cli.run("run", str(spec), "--id", AGENT, "--json")
    assert proc.returncode == EXIT_COMPLETED, proc.stderr
    audit = cli.run("audit", "verify", AGENT, "--json")
    assert audit.returncode == EXIT_COMPLETED, audit.stdout
    assert json.loads(audit.stdout)["ok"] is True
    return cli.db


@pytest.fixture
def cli(tmp_path: Path, finished_db: Path) -> Cli:
    """A private copy of the finished store, to damage."""
    cli = Cli(tmp_path)
    cli.db.parent.mkdir(parents=True)
    with sqlite3.connect(finished_db) as src, sqlite3.connect(cli.db) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return cli


def stored_events(db: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT seq, kind, data FROM events WHERE agent_id = ? ORDER BY seq", (AGENT,)
        ).fetchall()
    conn.close()
    return [(int(s), str(k), unpack(d, f"event {s}")) for s, k, d in rows]


def tamper(db: Path, seq: int, column: str = "data", value: Any = None) -> None:
    """Set one column of one stored event (or delete the event, for ``column=None``)."""
    with sqlite3.connect(db) as conn:
        if column is None:
            cur = conn.execute("DELETE FROM events WHERE agent_id = ? AND seq = ?", (AGENT, seq))
        else:
            sql = f"UPDATE events SET {column} = ? WHERE agent_id = ? AND seq = ?"
            cur = conn.execute(sql, (value, AGENT, seq))
        assert cur.rowcount == 1
    conn.close()


def verify(cli: Cli) -> tuple[int, str, int, dict[str, Any]]:
    """``stead audit verify`` for people and with ``--json``: codes and outputs."""
    text = cli.run("audit", "verify", AGENT)
    as_json = cli.run("audit", "verify", AGENT, "--json")
    report = json.loads(as_json.stdout)
    return text.returncode, text.stdout + text.stderr, as_json.returncode, report


def seq_of(cli: Cli, kind: str, contains: str) -> tuple[int, str]:
    """The first stored event of ``kind`` whose data text contains ``contains``."""
    for seq, k, data in stored_events(cli.db):
        if k == kind and contains in data:
            return seq, data
    raise AssertionError(f"no {kind} event with {contains!r}")


def one_char(data: str, old: str, new: str) -> str:
    """``data`` with the first ``old`` replaced by ``new``, which differs in one character."""
    assert len(old) == len(new) and sum(a != b for a, b in zip(old, new, strict=True)) == 1
    assert old in data
    return data.replace(old, new, 1)


def assert_names(cli: Cli, seq: int, total_before: int) -> dict[str, Any]:
    code, text, json_code, report = verify(cli)
    assert code == EXIT_FAILED, text
    assert f"event {seq} does not verify" in text, text
    assert json_code == EXIT_FAILED
    assert report["ok"] is False and report["bad_event"] == seq, report
    assert report["head_hash"] is None and report["reason"]
    assert total_before == len(stored_events(cli.db))  # verifying changed nothing
    return report


def test_an_intact_journal_verifies(cli: Cli) -> None:
    code, text, json_code, report = verify(cli)
    assert code == json_code == EXIT_COMPLETED, text
    events = stored_events(cli.db)
    assert report["ok"] is True and report["bad_event"] is None
    assert report["events"] == len(events) and f"{len(events)} events" in text


@pytest.mark.parametrize(
    ("kind", "find", "old", "new"),
    [
        ("tool_result", "notes.txt", "hello", "jello"),  # a tool's recorded output
        ("decision", "append_idempotent", '"n":7', '"n":8'),  # what the model decided
        ("memory_written", "checked", '"yes"', '"yas"'),  # the agent's memory
        ("finish_claimed", "all done", "all done", "all Done"),  # the claim of completion
    ],
    ids=["tool-output", "decision-args", "memory", "finish-summary"],
)
def test_a_one_character_edit_of_event_data_is_named(
    cli: Cli, kind: str, find: str, old: str, new: str
) -> None:
    seq, data = seq_of(cli, kind, find)
    edited = one_char(data, old, new)
    assert json.loads(edited) != json.loads(data)  # still valid JSON, different value
    total = len(stored_events(cli.db))
    tamper(cli.db, seq, "data", edited)
    report = assert_names(cli, seq, total)
    assert report["events"] == seq - 1  # every event before it still verifies
    assert "changed after it was written" in report["reason"]


def test_an_edit_that_breaks_the_json_is_named(cli: Cli) -> None:
    seq, data = seq_of(cli, "tool_result", "notes.txt")
    edited = data[:-1] + "]"  # one byte: the closing brace
    with pytest.raises(ValueError):
        json.loads(edited)
    total = len(stored_events(cli.db))
    tamper(cli.db, seq, "data", edited)
    report = assert_names(cli, seq, total)
    assert "not valid JSON" in report["reason"]


def _respace(data: str) -> str:
    return data.replace(",", ", ", 1)


def _reorder(data: str) -> str:
    return json.dumps(dict(reversed(json.loads(data).items())), separators=(",", ":"))


@pytest.mark.parametrize("rewrite", [_respace, _reorder], ids=["whitespace", "key-order"])
def test_an_edit_that_parses_to_the_same_value_is_named(
    cli: Cli, rewrite: Callable[[str], str]
) -> None:
    seq, data = seq_of(cli, "tool_result", "notes.txt")
    edited = rewrite(data)
    assert edited != data and json.loads(edited) == json.loads(data)
    total = len(stored_events(cli.db))
    tamper(cli.db, seq, "data", edited)
    assert_names(cli, seq, total)


@pytest.mark.parametrize(
    ("column", "value"),
    [("kind", "reconciled"), ("at", 0.5), ("prev_hash", "0" * 64), ("hash", "f" * 64)],
)
def test_an_edit_of_another_column_is_named(cli: Cli, column: str, value: Any) -> None:
    seq, _ = seq_of(cli, "tool_result", "notes.txt")
    total = len(stored_events(cli.db))
    tamper(cli.db, seq, column, value)
    assert_names(cli, seq, total)


def test_a_deleted_event_is_named(cli: Cli) -> None:
    seq, _ = seq_of(cli, "tool_result", "notes.txt")
    total = len(stored_events(cli.db))
    tamper(cli.db, seq, None)
    code, text, json_code, report = verify(cli)
    assert code == json_code == EXIT_FAILED, text
    assert report["bad_event"] == seq + 1 and report["events"] == seq - 1, report
    assert f"expected event {seq} but found {seq + 1}" in report["reason"]
    assert len(stored_events(cli.db)) == total - 1


@pytest.mark.parametrize("cut", [1, 3], ids=["last-event", "last-three-events"])
def test_deleting_the_last_events_is_named(cli: Cli, cut: int) -> None:
    """A cut tail is named: the journal must end at the agent's recorded head.

    What is left still links, so walking the chain alone cannot see the cut; but
    the agent's stored state says which version and head hash the journal ends at.
    """
    events = stored_events(cli.db)
    last = events[-1][0]
    first_missing = last - cut + 1
    for seq in range(last, first_missing - 1, -1):
        tamper(cli.db, seq, None)
    code, text, json_code, report = verify(cli)
    assert code == json_code == EXIT_FAILED, f"a journal missing its last {cut} event(s): {text}"
    assert report["ok"] is False and report["bad_event"] == first_missing, report
    assert f"event {first_missing}" in text, text


# -- a journal or state row that does not verify never runs --------------------------


def test_an_edited_state_row_is_refused_by_send_naming_the_agent(cli: Cli) -> None:
    with sqlite3.connect(cli.db) as conn:
        (text,) = conn.execute("SELECT state FROM agents WHERE agent_id = ?", (AGENT,)).fetchone()
        state = json.loads(unpack(text, "the state row"))
        state["memory"]["checked"] = "no"
        conn.execute("UPDATE agents SET state = ? WHERE agent_id = ?", (json.dumps(state), AGENT))
    conn.close()
    total = len(stored_events(cli.db))
    for args in (("send", AGENT, "hello"), ("resume", AGENT)):
        proc = cli.run(*args)
        assert proc.returncode == EXIT_FAILED, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        assert f"agent {AGENT}" in proc.stderr and f"stead audit verify {AGENT}" in proc.stderr
        assert "differs from the journal in memory" in proc.stderr
    assert len(stored_events(cli.db)) == total  # nothing ran on the edited row


def test_a_workspace_rewritten_after_the_agent_finished_fails_the_audit(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    spec = write_spec(cli.root / "agent", SCRIPT, name="tamper")
    assert cli.run("run", str(spec), "--id", AGENT).returncode == EXIT_COMPLETED
    note = cli.data_dir / "workspaces" / "default" / AGENT / "notes.txt"
    assert note.read_text() == "hello, auditor\n"
    note.write_text("written by a worker that had lost its lease\n")
    code, text, json_code, report = verify(cli)
    assert code == json_code == EXIT_FAILED, text
    assert report["drift"] == ["notes.txt"] and "changed notes.txt" in report["reason"]
    assert "workspace differs from the last committed manifest" in text
