"""What a ``postgresql://`` store URL names: a server, a database, a schema.

The form is libpq's own URL, with two parameters of stead's::

    postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?schema=NAME][&pool_max=N][&LIBPQ_PARAM=…]

* ``schema``: the PostgreSQL schema stead's tables live in, made on first use
  (a plain lowercase name: letters, digits, ``_``). Without it, the
  connection's own search path decides (normally ``public``). Several stores
  can share one database, each in a schema of its own, and a test can drop
  its schema afterwards.
* ``pool_max``: how many connections the store's pool may open (default 16).

Everything else (``sslmode``, ``connect_timeout``, ``options``, …) goes to
libpq as it is; ``connect_timeout`` defaults to 10 seconds and
``application_name`` to ``stead``.

Every session also gets ``idle_in_transaction_session_timeout`` (5 seconds,
unless ``options`` sets it): a worker that stops or is cut off from the server
inside a transaction holds its agents' rows locked, and claims skip locked
rows, so without a bound on that wait its agents would not be taken over until
it came back. stead's transactions never wait on anything but their own
statements, so a session idle that long inside one belongs to a worker that is
gone. Set it higher (``options=-c idle_in_transaction_session_timeout=30000``)
only on a server whose clients stall for seconds.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import UsageError

IDLE_IN_TRANSACTION_MS = 5000
"""How long the server lets a session sit idle inside a transaction before ending
it (and its row locks): see the module's docstring."""
DEFAULT_POOL_MAX = 48
"""Enough for ``stead work``'s default 32 agents at once, their heartbeats and the
group committer, so threads seldom queue for a connection."""
_FORM = "postgresql://USER@HOST:PORT/DATABASE?schema=NAME"
MAX_SCHEMA = 52
"""PostgreSQL cuts names at 63 characters, and the store's notify channel is
``stead_work_SCHEMA`` (:mod:`.postgres_wakeups`): a longer schema would name a
channel the server refuses."""
_SCHEMA = re.compile(rf"[a-z_][a-z0-9_]{{0,{MAX_SCHEMA - 1}}}")


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed store URL: libpq's connection string and stead's own parameters."""

    conninfo: str
    schema: str | None
    pool_max: int
    where: str
    """The server, database and schema, without credentials: for messages."""


def parse(url: str) -> Target:
    """Split stead's parameters off a ``postgresql://`` URL; refuse what cannot be used."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number, or past 65535, raises here
    except ValueError as exc:
        raise UsageError(f"cannot use the store URL: {exc}; use {_FORM}") from None
    schema: str | None = None
    pool_max = DEFAULT_POOL_MAX
    options: list[str] = []
    rest: list[tuple[str, str]] = []
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if key == "schema":
            if not _SCHEMA.fullmatch(value):
                raise UsageError(
                    f"the store URL's schema {value!r} is not a plain schema name; use "
                    f"lowercase letters, digits and _ (at most {MAX_SCHEMA}), starting with a "
                    "letter or _"
                )
            schema = value
        elif key == "pool_max":
            if not value.isdigit() or not 1 <= int(value) <= 1000:
                raise UsageError(f"the store URL's pool_max {value!r} is not a number 1 to 1000")
            pool_max = int(value)
        elif key == "options":
            options.append(value)
        else:
            rest.append((key, value))
    if schema is not None:
        options.append(f"-c search_path={schema}")
    if not any("idle_in_transaction_session_timeout" in o for o in options):
        options.append(f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}")
    base = urllib.parse.urlunsplit(
        parts._replace(query=urllib.parse.urlencode(rest, quote_via=urllib.parse.quote))
    )
    extra: dict[str, str] = {}
    if options:
        extra["options"] = " ".join(options)
    try:
        given = conninfo_to_dict(base)
        extra.setdefault("connect_timeout", str(given.get("connect_timeout") or 10))
        extra.setdefault("application_name", str(given.get("application_name") or "stead"))
        conninfo = make_conninfo(base, **extra)
    except psycopg.ProgrammingError as exc:
        raise UsageError(f"cannot use the store URL: {exc}") from None
    host = given.get("host") or "localhost"
    where = f"postgresql://{host}:{given.get('port') or 5432}/{given.get('dbname') or ''}"
    if schema is not None:
        where += f"?schema={schema}"
    return Target(conninfo, schema, pool_max, where)


def reason(exc: BaseException) -> str:
    """What a driver error says, on one line: its first line, or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
