"""A store's history on SQLite and PostgreSQL: which stead made it, which migrated it.

An older store is built as an older stead left it: only the first migrations
applied, with no history table. A newer one is made by "a newer stead": this
one with a migration appended to its list and its version set ahead, which is
exactly what the next release will be.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql
from tests.postgres import connect, fresh_schema, url_for

from stead import __version__
from stead.errors import SchemaTooNew
from stead.store import history, postgres_migrations, sqlite_migrations
from stead.store.peek import peek
from stead.store.postgres import PostgresStore
from stead.store.sqlite import SqliteStore

NEWER = "9.9.0"
SQLITE_NOW = len(sqlite_migrations.MIGRATIONS)
POSTGRES_NOW = len(postgres_migrations.MIGRATIONS)


@contextmanager
def newer_stead(
    migrations: list[Any], monkeypatch: pytest.MonkeyPatch, step: str
) -> Iterator[None]:
    """This stead as the next release: one more migration, and a higher version."""
    migrations.append(step)
    with monkeypatch.context() as m:
        m.setattr(history, "__version__", NEWER)
        try:
            yield
        finally:
            migrations.pop()


def older_sqlite(path: Path, versions: int) -> None:
    """The store a stead from before the history table left: WAL, ``versions`` applied."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN")
    db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL)")
    for version, migration in enumerate(sqlite_migrations.MIGRATIONS[:versions], 1):
        if callable(migration):
            migration(db)
        else:
            for statement in migration.split(";"):
                if statement.strip():
                    db.execute(statement)
        db.execute("INSERT INTO schema_migrations VALUES (?, julianday('now'))", (version,))
    db.execute("COMMIT")
    db.close()


# -- SQLite ------------------------------------------------------------------------------


def test_an_older_sqlite_store_gains_rows_for_what_this_stead_applies(tmp_path: Path) -> None:
    path = tmp_path / "stead.db"
    older_sqlite(path, SQLITE_NOW - 1)
    info = peek(f"sqlite:///{path}")
    assert info is not None and (info.schema_version, info.history) == (SQLITE_NOW - 1, [])
    with SqliteStore(path) as store:
        (row,) = store.history()  # what applied versions 1-10 was never written down
        assert (row.schema_version, row.stead_version) == (SQLITE_NOW, __version__)
    info = peek(f"sqlite:///{path}")
    assert info is not None and info.made_by is None and info.last == row


def test_opening_an_up_to_date_sqlite_store_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "stead.db"
    SqliteStore(path).close()
    before = path.read_bytes()
    with SqliteStore(path) as store:
        rows = store.history()
    assert path.read_bytes() == before
    with SqliteStore(path) as store:
        assert store.history() == rows


def test_a_sqlite_store_a_newer_stead_migrated_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "stead.db"
    SqliteStore(path).close()
    step = "CREATE TABLE later (x)"
    with newer_stead(sqlite_migrations.MIGRATIONS, monkeypatch, step), SqliteStore(path) as store:
        rows = store.history()
    assert [(r.schema_version, r.stead_version) for r in rows[-2:]] == [
        (SQLITE_NOW, __version__),
        (SQLITE_NOW + 1, NEWER),
    ]
    assert rows[0].stead_version == __version__  # it still says which stead made it
    before = path.read_bytes()
    with pytest.raises(SchemaTooNew) as info:
        SqliteStore(path)
    assert str(info.value) == (
        f"the database {path} has schema version {SQLITE_NOW + 1}, made by stead {NEWER}; "
        f"this stead ({__version__}) understands versions up to {SQLITE_NOW}: upgrade stead "
        f"to at least {NEWER} before opening it (it was not changed)"
    )
    assert path.read_bytes() == before


def test_a_newer_sqlite_store_without_a_history_is_refused_all_the_same(tmp_path: Path) -> None:
    path = tmp_path / "stead.db"
    older_sqlite(path, 1)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("INSERT INTO schema_migrations VALUES (?, 0)", (SQLITE_NOW + 3,))
    db.close()
    with pytest.raises(SchemaTooNew, match=r"made by a newer stead; .*: upgrade stead before"):
        SqliteStore(path)


# -- PostgreSQL --------------------------------------------------------------------------


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.fixture
def raw(schema: str) -> Iterator[Any]:
    with connect() as db:
        db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield db


def contents(db: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table in the schema."""
    names = db.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    ).fetchall()
    return {
        name: sorted(db.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(name))), key=repr)
        for (name,) in names
    }


def older_postgres(schema: str, raw: Any, versions: int) -> None:
    """The schema a stead from before the history table left: ``versions`` applied."""
    raw.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    raw.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
    for version, migration in enumerate(postgres_migrations.MIGRATIONS[:versions], 1):
        migration(raw) if callable(migration) else raw.execute(migration)
        raw.execute("INSERT INTO schema_migrations VALUES (%s)", (version,))


def test_a_new_postgres_store_records_this_stead_from_version_one(schema: str) -> None:
    with PostgresStore(url_for(schema)) as store:
        rows = store.history()
    assert [(r.schema_version, r.stead_version) for r in rows] == [
        (v, __version__) for v in range(1, POSTGRES_NOW + 1)
    ]


def test_an_older_postgres_store_gains_rows_for_what_this_stead_applies(
    schema: str, raw: Any
) -> None:
    older_postgres(schema, raw, POSTGRES_NOW - 1)
    with PostgresStore(url_for(schema)) as store:
        (row,) = store.history()
    assert (row.schema_version, row.stead_version) == (POSTGRES_NOW, __version__)
    before = contents(raw)
    PostgresStore(url_for(schema)).close()  # up to date: its opening writes nothing
    assert contents(raw) == before


def test_a_postgres_store_a_newer_stead_migrated_is_refused_naming_it(
    schema: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    PostgresStore(url_for(schema)).close()
    with newer_stead(postgres_migrations.MIGRATIONS, monkeypatch, "CREATE TABLE later (x int)"):
        PostgresStore(url_for(schema)).close()
    before = contents(raw)
    assert max(before["store_history"])[:2] == (POSTGRES_NOW + 1, NEWER)
    for create in (True, False):
        with pytest.raises(SchemaTooNew) as info:
            PostgresStore(url_for(schema), create=create)
        assert f"has schema version {POSTGRES_NOW + 1}, made by stead {NEWER}; " in str(info.value)
        assert f"this stead ({__version__}) understands versions up to {POSTGRES_NOW}: " in str(
            info.value
        )
        assert f"upgrade stead to at least {NEWER} before opening it" in str(info.value)
    assert contents(raw) == before
