"""A PostgreSQL schema of its own for each test that needs one: made, used, dropped.

The server is the machine's (``STEAD_TEST_POSTGRES_URL``, by default
``postgresql://postgres@127.0.0.1:5432/test``: trust auth, database ``test``).
Where none answers, a test skips saying so, and fails in CI (``tests.needs``).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from stead.store.postgres import PostgresStore

from .needs import missing

SERVER = os.environ.get("STEAD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def connect() -> psycopg.Connection[tuple[object, ...]]:
    """A plain connection to the test database (autocommit), or skip (fail in CI)."""
    try:
        return psycopg.connect(SERVER, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        missing(f"no PostgreSQL at 127.0.0.1:5432: {reason}", "run PostgreSQL")


def url_for(schema: str, **params: str) -> str:
    """The store URL of ``schema`` in the test database."""
    query = "&".join([f"schema={schema}", *(f"{k}={v}" for k, v in params.items())])
    return f"{SERVER}{'&' if '?' in SERVER else '?'}{query}"


@contextmanager
def fresh_schema() -> Iterator[str]:
    """The name of a schema no one uses yet; dropped with everything in it afterwards."""
    name = f"stead_test_{secrets.token_hex(6)}"
    with connect() as admin:
        try:
            yield name
        finally:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@contextmanager
def postgres_store(**params: str) -> Iterator[PostgresStore]:
    """A fresh, empty store in a schema of its own, closed and dropped afterwards."""
    with fresh_schema() as schema:
        store = PostgresStore(url_for(schema, **params))
        try:
            yield store
        finally:
            store.close()
