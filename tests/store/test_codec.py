"""Rows compressed at rest (stead.store.codec): what is stored, what reads back, and
what a store made before compression becomes when this stead opens it."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql
from tests.postgres import connect, fresh_schema, url_for

from stead.canonical import dumps
from stead.errors import IntegrityError
from stead.integrity.chaincheck import audit_journal
from stead.journal import Kind, NewEvent, event_hash, verify_chain
from stead.state import fold
from stead.store import codec, postgres_migrations, sqlite_migrations
from stead.store.base import AgentRecord, Store
from stead.store.postgres import PostgresStore
from stead.store.sqlite import SqliteStore

T0 = 1_767_225_600.0
GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "rows_v1.json"
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(st.dictionaries(st.text(), json_values, max_size=8))
@settings(max_examples=300, deadline=None)
def test_any_json_text_reads_back_exactly_and_is_stored_no_larger(data: dict[str, Any]) -> None:
    text = dumps(data)
    stored = codec.pack(text)
    assert codec.unpack(stored, "a row") == text
    if isinstance(stored, bytes):
        assert stored[0] == codec.WRITE_CODEC and len(stored) < len(text.encode("utf-8"))
    else:
        assert stored == text


@given(st.lists(st.dictionaries(st.text(), json_values, max_size=6), min_size=1, max_size=4))
@settings(max_examples=60, deadline=None)
def test_any_event_data_stored_in_sqlite_reads_back_with_the_hash_it_was_sealed_with(
    datas: list[dict[str, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp, SqliteStore(Path(tmp) / "s.db") as store:
        state = store.create_agent(
            _record(), [NewEvent(Kind.AGENT_CREATED, {"tenant": "t1", "name": "n"})], at=T0
        )
        sealed, _ = store.commit(
            state, [NewEvent(Kind.WORKSPACE_RESTORED, d) for d in datas], epoch=0, at=T0 + 1
        )
        stored = list(store.read_events("ag_1"))[1:]
        assert [(e.data_json, e.hash, e.prev_hash) for e in stored] == [
            (e.data_json, e.hash, e.prev_hash) for e in sealed
        ]
        assert [dict(e.data) for e in stored] == datas
        assert verify_chain(store.read_events("ag_1")).ok


@given(st.binary(min_size=32, max_size=32))
def test_a_hash_is_stored_as_its_bytes_and_reads_back_as_its_hex(raw: bytes) -> None:
    assert codec.pack_hash(raw.hex()) == raw
    assert codec.unpack_hash(codec.pack_hash(raw.hex())) == raw.hex()
    shouted = raw.hex().upper()
    if shouted != raw.hex():  # not how stead writes a hash: kept as it is
        assert codec.pack_hash(shouted) == shouted


def test_rows_written_with_the_shipped_dictionary_stay_readable() -> None:
    """The golden rows were stored by the stead that shipped dictionary 1; every later
    stead reads them. The dictionary itself is pinned: retraining it in place would
    make them unreadable (a new one takes a new codec byte)."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    shipped = Path(codec.__file__).with_name(codec.CODECS[codec.DICTIONARY_1]).read_bytes()
    assert hashlib.sha256(shipped).hexdigest() == golden["dictionary_sha256"]
    for row in golden["rows"]:
        assert codec.unpack(bytes.fromhex(row["stored"]), "a golden row") == row["text"]


@pytest.mark.parametrize(
    ("stored", "says"),
    [
        (b"\x7f" + b"\x28\xb5\x2f\xfd" + b"\0" * 8, "codec 127"),
        (b"", "an empty value"),
        (None, "an empty value"),
        (b"\x01" + b"not a frame at all", "damaged"),
    ],
)
def test_a_row_that_does_not_unpack_is_an_integrity_error(stored: Any, says: str) -> None:
    with pytest.raises(IntegrityError, match=says) as info:
        codec.unpack(stored, "agent ag_1: event 4", 4)
    assert info.value.seq == 4 and "event 4" in str(info.value)


def test_a_damaged_frame_is_an_integrity_error_not_garbage() -> None:
    text = dumps({"values": {"note": "a fairly ordinary memory write " * 4}})
    stored = bytearray(codec.pack(text))
    stored[len(stored) // 2] ^= 0xFF
    try:
        back = codec.unpack(bytes(stored), "a row")
    except IntegrityError:
        return
    assert back != text  # a flip zstandard cannot see is the chain's to catch


# -- the SQL stores ------------------------------------------------------------------


def _record(agent_id: str = "ag_1") -> AgentRecord:
    spec = {"name": "n", "model": "scripted:s.yaml", "tools": ["read_file", "write_file"]}
    return AgentRecord(agent_id, "t1", "n", spec, T0)


def _journal(store: Store, agent_id: str = "ag_1", n: int = 6) -> None:
    state = store.create_agent(
        _record(agent_id), [NewEvent(Kind.AGENT_CREATED, {"tenant": "t1", "name": "n"})], at=T0
    )
    for i in range(n):
        note = f"note {i}: " + "the agent wrote this down to remember it. " * 3
        _, state = store.commit(
            state,
            [NewEvent(Kind.MEMORY_WRITTEN, {"values": {f"k{i}": note}})],
            epoch=0,
            at=T0 + i,
        )


def test_sqlite_keeps_large_rows_compressed_and_short_ones_as_text(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        _journal(store)
        events = list(store.read_events("ag_1"))
    con = sqlite3.connect(tmp_path / "s.db")
    rows = con.execute("SELECT data, prev_hash, hash FROM events ORDER BY seq").fetchall()
    state, spec = con.execute("SELECT state, spec FROM agents").fetchone()
    con.close()
    kinds = [type(d) for d, _, _ in rows]
    assert bytes in kinds and all(isinstance(h, bytes) and len(h) == 32 for _, _, h in rows)
    assert [codec.unpack(d, "e") for d, _, _ in rows] == [e.data_json for e in events]
    assert [(codec.unpack_hash(p), codec.unpack_hash(h)) for _, p, h in rows] == [
        (e.prev_hash, e.hash) for e in events
    ]
    for e in events:  # the hash is over the canonical text, as before compression
        assert e.hash == event_hash(e.agent_id, e.seq, e.kind, e.at, e.data_json, e.prev_hash)
    assert isinstance(state, bytes) and isinstance(spec, bytes)


def test_a_corrupt_compressed_sqlite_row_names_its_event(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        _journal(store)
        con = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
        con.execute("UPDATE events SET data = ? WHERE agent_id = 'ag_1' AND seq = 4", (b"\x09zz",))
        con.close()
        with pytest.raises(IntegrityError, match="event 4") as info:
            list(store.read_events("ag_1"))
        assert info.value.seq == 4
        assert [e.seq for e in store.read_events("ag_1", 1, 3)] == [1, 2, 3]
        report = audit_journal(store, "ag_1")
        assert not report.ok and report.bad_event == 4


def _as_before_compression(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Write the journal as a stead from before compression did: every row text."""
    with monkeypatch.context() as m:
        m.setattr(codec, "pack", lambda text, level=0: text)
        m.setattr(codec, "pack_hash", lambda digest: digest)
        _journal(store, "ag_old")


def test_an_sqlite_store_from_before_compression_migrates_and_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        _as_before_compression(store, monkeypatch)
    # what that stead's schema was: every migration before the one that compressed rows
    old = sqlite_migrations.MIGRATIONS.index(sqlite_migrations.compressed_rows)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("DELETE FROM schema_migrations WHERE version > ?", (old,))
    con.execute("DELETE FROM store_history WHERE schema_version > ?", (old,))
    assert {type(r[0]) for r in con.execute("SELECT data FROM events")} == {str}
    con.close()
    with SqliteStore(path) as store:
        assert store.recorded_schema_version() == len(sqlite_migrations.MIGRATIONS)
        before = list(store.read_events("ag_old"))
        assert verify_chain(before).ok and fold(before) == store.load_state("ag_old")
        state = store.load_state("ag_old")
        store.commit(state, [NewEvent(Kind.MEMORY_WRITTEN, {"values": {"x": "y" * 90}})],
                     epoch=0, at=T0 + 50)  # fmt: skip
        after = list(store.read_events("ag_old"))
        assert after[:-1] == before and verify_chain(after).ok
        assert audit_journal(store, "ag_old").ok
    con = sqlite3.connect(path)
    kinds = [type(r[0]) for r in con.execute("SELECT data FROM events ORDER BY seq")]
    con.close()
    assert kinds[:-1] == [str] * (len(kinds) - 1) and kinds[-1] is bytes  # old rows as they were


# -- PostgreSQL ----------------------------------------------------------------------


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.fixture
def raw(schema: str) -> Iterator[Any]:
    with connect() as db:
        db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield db


def test_a_corrupt_compressed_postgres_row_names_its_event(schema: str, raw: Any) -> None:
    with PostgresStore(url_for(schema)) as store:
        _journal(store)
        raw.execute(
            "UPDATE events SET packed = '\\x09'::bytea WHERE seq = 4 AND packed IS NOT NULL"
        )
        assert raw.execute("SELECT packed FROM events WHERE seq = 4").fetchone() == (b"\x09",)
        with pytest.raises(IntegrityError, match="event 4") as info:
            list(store.read_events("ag_1"))
        assert info.value.seq == 4


def test_a_postgres_store_from_before_compression_migrates_and_reads(
    schema: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresStore(url_for(schema)) as store:
        _as_before_compression(store, monkeypatch)
    old = next(i for i, m in enumerate(postgres_migrations.MIGRATIONS)
               if isinstance(m, str) and "ADD COLUMN packed" in m)  # fmt: skip
    # the schema as that stead left it: no packed column, every row's data text
    raw.execute("ALTER TABLE events DROP COLUMN packed")
    raw.execute("ALTER TABLE events ALTER COLUMN data SET NOT NULL")
    raw.execute("DELETE FROM schema_migrations WHERE version > %s", (old,))
    raw.execute("DELETE FROM store_history WHERE schema_version > %s", (old,))
    with PostgresStore(url_for(schema)) as store:
        assert store.recorded_schema_version() == len(postgres_migrations.MIGRATIONS)
        before = list(store.read_events("ag_old"))
        assert verify_chain(before).ok and fold(before) == store.load_state("ag_old")
        state = store.load_state("ag_old")
        store.commit(state, [NewEvent(Kind.MEMORY_WRITTEN, {"values": {"x": "y" * 90}})],
                     epoch=0, at=T0 + 50)  # fmt: skip
        after = list(store.read_events("ag_old"))
        assert after[:-1] == before and verify_chain(after).ok
        assert audit_journal(store, "ag_old").ok
    rows = raw.execute("SELECT data IS NULL, packed IS NULL FROM events ORDER BY seq").fetchall()
    assert rows[:-1] == [(False, True)] * (len(rows) - 1) and rows[-1] == (True, False)


def test_a_checkpoint_is_compressed_running_or_at_rest() -> None:
    """A running agent's checkpoint at the fast level, one at rest at the smaller one;
    each reads back the same (the level is no part of the stored format)."""
    text = dumps({"memory": {"note": "what the agent keeps between steps " * 10}})
    running = codec.pack_checkpoint(text, "running")
    assert isinstance(running, bytes) and codec.unpack(running, "a state row") == text
    for status in ("created", "waiting", "hibernated", "completed"):
        packed = codec.pack_checkpoint(text, status)
        assert isinstance(packed, bytes) and codec.unpack(packed, "a state row") == text
        assert len(packed) <= len(running)
