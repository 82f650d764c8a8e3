"""What only the PostgreSQL backend promises: its migrations, its URL, its stored form,
and the locks that keep workers on many hosts from losing or forging a write.

The behaviour every backend shares is in tests/conformance/, which runs against
this backend too. Each test here has a schema of its own (tests/postgres.py), and
each concurrent worker a store of its own, so a pool of connections of its own, as
a worker on another host would have.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from functools import partial
from typing import Any

import psycopg
import pytest
from psycopg import sql
from tests.postgres import connect, fresh_schema, url_for

from stead.canonical import sha256_hex
from stead.errors import (
    IntegrityError,
    LeaseHeld,
    SchemaTooNew,
    StaleEpoch,
    SteadError,
    StoreUnusable,
    UsageError,
    VersionConflict,
)
from stead.journal import Kind, NewEvent, seal, verify_chain
from stead.state import State, fold
from stead.store import codec, open_store, postgres
from stead.store.base import AgentRecord, Batch, Lease
from stead.store.postgres import PostgresStore
from stead.store.postgres_migrations import MIGRATIONS, refold_states
from stead.store.postgres_url import parse

T0 = 1_767_225_600.0
TTL = 30.0
TABLES = {
    "agents", "anchors", "api_tokens", "blobs", "events", "leases", "operator_log", "policies",
    "schema_migrations", "secrets", "signals", "snapshots",
    "webhooks", "webhook_outbox", "webhook_attempts", "store_history", "schedules",
    "schedule_firings",
    "memories",
}  # fmt: skip

Raw = psycopg.Connection[tuple[Any, ...]]


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.fixture
def store(schema: str) -> Iterator[PostgresStore]:
    s = PostgresStore(url_for(schema))
    yield s
    s.close()


@pytest.fixture
def raw(schema: str) -> Iterator[Raw]:
    """A connection of its own to the schema, as another program (or an attacker) has."""
    with connect() as db:
        db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield db


@pytest.fixture
def workers(schema: str) -> Iterator[Callable[[int], list[PostgresStore]]]:
    """``workers(n)``: n stores on the schema, each with its own pool, closed afterwards."""
    with ExitStack() as stack:

        def make(n: int) -> list[PostgresStore]:
            return [stack.enter_context(PostgresStore(url_for(schema))) for _ in range(n)]

        yield make


def seed(store: PostgresStore, agent_id: str = "ag_1") -> State:
    """An agent with five events; event 3 holds {"values": {"colour": "blue", …}}."""
    state = store.create_agent(
        AgentRecord(agent_id, "t1", "n", {"name": "n", "note": "ünïcode ✓"}, T0),
        [NewEvent(Kind.AGENT_CREATED, {"tenant": "t1", "name": "n"})],
        at=T0,
    )
    _, state = store.commit(
        state,
        [
            NewEvent(Kind.ACTIVATION_STARTED, {"worker": "w1"}),
            NewEvent(Kind.MEMORY_WRITTEN, {"values": {"colour": "blue", "ß": "日本"}}),
            NewEvent(Kind.GOAL_PUSHED, {"id": "g", "description": "x"}),
            NewEvent(Kind.STEP_COMPLETED, {}),
        ],
        epoch=0,
        at=T0 + 1,
    )
    return state


def memory(i: int) -> list[NewEvent]:
    return [NewEvent(Kind.MEMORY_WRITTEN, {"values": {f"k{i}": i}})]


def contents(db: Raw) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table in the schema: what "nothing was changed" compares."""
    names = db.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    ).fetchall()
    out = {}
    for (name,) in names:
        rows = db.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(name))).fetchall()
        out[name] = sorted(rows, key=repr)
    return out


def everything(store: PostgresStore, agent_id: str) -> tuple[Any, ...]:
    """What a refused write must leave as it was: journal, state row, anchor, listing."""
    return (
        list(store.read_events(agent_id)),
        store.load_state(agent_id).to_json(),
        store.get_anchor(agent_id),
        [a for a in store.list_agents() if a.agent_id == agent_id],
    )


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Run each call on its own thread, released at once; each one's result or exception."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except SteadError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# -- migrations ------------------------------------------------------------------------


def test_a_fresh_schema_gets_the_current_version(store: PostgresStore, raw: Raw) -> None:
    assert store.recorded_schema_version() == len(MIGRATIONS) == PostgresStore.schema_version
    versions = [r[0] for r in raw.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    assert set(contents(raw)) == TABLES


def test_reopening_keeps_data_and_applies_no_migration_twice(schema: str, raw: Raw) -> None:
    with PostgresStore(url_for(schema)) as first:
        seed(first)
    with PostgresStore(url_for(schema)) as second:
        assert second.recorded_schema_version() == len(MIGRATIONS)
        assert second.load_state("ag_1").version == 5
        assert verify_chain(second.read_events("ag_1")).ok
    assert raw.execute("SELECT COUNT(*) FROM schema_migrations").fetchone() == (len(MIGRATIONS),)


@pytest.mark.parametrize("create", [True, False])
def test_a_newer_schema_is_refused_and_nothing_is_changed(
    schema: str, raw: Raw, create: bool
) -> None:
    with PostgresStore(url_for(schema)) as s:
        seed(s)
    raw.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
    before = contents(raw)
    with pytest.raises(SchemaTooNew, match="upgrade stead") as info:
        PostgresStore(url_for(schema), create=create)
    assert f"schema version {len(MIGRATIONS) + 1}" in str(info.value)
    assert "it was not changed" in str(info.value)
    assert contents(raw) == before


def test_a_newer_schema_with_only_its_version_table_is_left_as_it_is(schema: str, raw: Raw) -> None:
    # whatever a newer stead's tables are, nothing of this one's may be added to them
    raw.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    raw.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, note TEXT)")
    raw.execute("INSERT INTO schema_migrations VALUES (%s, 'newer')", (len(MIGRATIONS) + 5,))
    before = contents(raw)
    with pytest.raises(SchemaTooNew):
        open_store(url_for(schema))
    assert contents(raw) == before


def test_a_command_that_only_reads_makes_no_schema(schema: str, raw: Raw) -> None:
    with pytest.raises(StoreUnusable, match="there is no store at"):
        PostgresStore(url_for(schema), create=False)
    found = raw.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert found is None


def test_a_schema_of_another_program_is_refused_and_left_as_it_is(schema: str, raw: Raw) -> None:
    raw.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    raw.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    raw.execute("INSERT INTO orders VALUES (1)")
    before = contents(raw)
    with pytest.raises(StoreUnusable, match=r"not a stead store.*'orders'"):
        PostgresStore(url_for(schema))
    assert contents(raw) == before


def test_stores_opening_one_fresh_schema_at_once_migrate_it_once(schema: str, raw: Raw) -> None:
    opened = together(*[lambda: PostgresStore(url_for(schema)) for _ in range(4)])
    try:
        assert all(isinstance(s, PostgresStore) for s in opened), opened
    finally:
        for s in opened:
            if isinstance(s, PostgresStore):
                s.close()
    versions = [r[0] for r in raw.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))


def test_refold_states_makes_each_state_row_the_fold_of_its_journal_again(
    store: PostgresStore, raw: Raw
) -> None:
    """What a migration appending ``refold_states`` does; a cut journal is left alone."""
    from stead.integrity.audit import audit

    seed(store, "ag_old")
    seed(store, "ag_cut")
    expected = fold(store.read_events("ag_old")).to_json()
    cut_row = raw.execute("SELECT state FROM agents WHERE agent_id = 'ag_cut'").fetchone()
    # what an older fold left (a row without a newer field), and a journal cut short
    old = {k: v for k, v in expected.items() if k != "failed_in_row"}
    raw.execute("UPDATE agents SET state = %s WHERE agent_id = 'ag_old'", (json.dumps(old),))
    raw.execute("DELETE FROM events WHERE agent_id = 'ag_cut' AND seq = 5")
    with raw.transaction():
        refold_states(raw)
    (row,) = raw.execute("SELECT state FROM agents WHERE agent_id = 'ag_old'").fetchone()
    assert json.loads(row) == expected
    assert store.load_state("ag_old").to_json() == expected
    assert audit(store, "ag_old").ok
    assert raw.execute("SELECT state FROM agents WHERE agent_id = 'ag_cut'").fetchone() == cut_row
    assert not audit(store, "ag_cut").ok


# -- what is stored --------------------------------------------------------------------


def test_event_data_and_state_rows_are_the_exact_text_that_was_hashed(
    store: PostgresStore, raw: Raw
) -> None:
    state = seed(store)
    for ev in store.read_events("ag_1"):
        text, packed = raw.execute(
            "SELECT data, packed FROM events WHERE agent_id = 'ag_1' AND seq = %s", (ev.seq,)
        ).fetchone()
        # text as it was, or that text compressed (stead.store.codec), never both
        assert (text is None) != (packed is None)
        assert codec.unpack(packed if text is None else text, "event") == ev.data_json
    (row,) = raw.execute("SELECT state FROM agents WHERE agent_id = 'ag_1'").fetchone()
    anchor = store.get_anchor("ag_1")
    assert anchor is not None and sha256_hex(row) == anchor.state_hash
    assert store.load_state("ag_1") == state
    assert store.get_record("ag_1").spec == {"name": "n", "note": "ünïcode ✓"}


def test_an_edit_that_parses_to_the_same_value_is_still_reported(
    store: PostgresStore, raw: Raw
) -> None:
    seed(store)
    raw.execute("UPDATE events SET data = data || ' ' WHERE agent_id = 'ag_1' AND seq = 3")
    report = verify_chain(store.read_events("ag_1"))
    assert (report.ok, report.bad_seq) == (False, 3)


def test_data_that_is_no_longer_json_raises_integrity_error_naming_the_seq(
    store: PostgresStore, raw: Raw
) -> None:
    seed(store)
    raw.execute("UPDATE events SET data = left(data, -1) WHERE agent_id = 'ag_1' AND seq = 3")
    with pytest.raises(IntegrityError, match="event 3") as info:
        list(store.read_events("ag_1"))
    assert info.value.seq == 3
    assert [e.seq for e in store.read_events("ag_1", 1, 2)] == [1, 2]
    with pytest.raises(IntegrityError, match="event 3"):
        store.read_events_of_kinds("ag_1", [Kind.MEMORY_WRITTEN])


def test_listings_sort_by_code_point_whatever_the_database_collation(
    store: PostgresStore,
) -> None:
    ids = ["ag_b", "ag_B", "ag__", "ag_a1", "ag_A", "ag_é", "ag_Z"]
    for agent_id in ids:
        seed(store, agent_id)
    assert [a.agent_id for a in store.list_agents()] == sorted(ids)
    for n, agent_id in enumerate(ids):
        store.put_secret("t1", agent_id, f"K{n % 2}", "sealed", T0)
    assert [a for a, _, _ in store.list_secrets("t1")] == sorted(ids)


# -- writers on several hosts ------------------------------------------------------------


def test_two_writers_with_the_same_expected_version_exactly_one_wins(
    workers: Callable[[int], list[PostgresStore]],
) -> None:
    a, b = workers(2)
    for round_no in range(10):
        agent_id = f"ag_{round_no}"
        base = seed(a, agent_id)
        results = together(
            lambda base=base: a.commit(base, memory(1), epoch=0, at=T0 + 2),
            lambda base=base: b.commit(base, memory(2) + memory(3), epoch=0, at=T0 + 2),
        )
        won = [r for r in results if not isinstance(r, SteadError)]
        lost = [r for r in results if isinstance(r, SteadError)]
        assert len(won) == 1 and len(lost) == 1, results
        assert isinstance(lost[0], VersionConflict), lost
        sealed, state = won[0]
        stored = list(b.read_events(agent_id))
        assert stored[5:] == sealed and len(stored) == 5 + len(sealed)
        assert verify_chain(stored).ok
        assert a.load_state(agent_id) == state == fold(stored)


def test_a_write_under_a_stale_epoch_after_another_worker_took_the_lease_stores_nothing(
    workers: Callable[[int], list[PostgresStore]],
) -> None:
    a, b = workers(2)
    state = seed(a)
    mine = a.acquire_lease("ag_1", "host-a:1:x", TTL, T0 + 2)
    _, state = a.commit(state, memory(1), epoch=mine.epoch, at=T0 + 3)
    # a stalls past its lease; b, on another host, takes the agent over
    theirs = b.acquire_lease("ag_1", "host-b:1:y", TTL, T0 + 3 + TTL)
    assert theirs.epoch == mine.epoch + 1
    before = everything(b, "ag_1")
    with pytest.raises(StaleEpoch, match=f"epoch {mine.epoch} refused"):
        a.commit(state, memory(2), epoch=mine.epoch, at=T0 + 4 + TTL)
    sealed = seal("ag_1", state.version + 1, state.head_hash, T0 + 5 + TTL, mine.epoch, memory(3))
    (refused,) = a.append_many([Batch(sealed, fold(sealed, state), state.version, mine.epoch)], 0)
    assert isinstance(refused, StaleEpoch)
    with pytest.raises(StaleEpoch):
        a.renew_lease(mine, TTL, T0 + 6 + TTL)
    assert everything(a, "ag_1") == everything(b, "ag_1") == before
    # the new holder writes on from where the old one stopped
    b.commit(state, memory(4), epoch=theirs.epoch, at=T0 + 7 + TTL)


@pytest.mark.parametrize("first", [True, False], ids=["first-lease", "takeover"])
def test_a_write_that_waited_on_an_acquisition_is_refused_by_its_epoch(
    store: PostgresStore, schema: str, first: bool
) -> None:
    """The write locks the agent's row, then reads the epoch: one that waited for an
    acquisition to commit sees the epoch it raised, even a lease row it inserted."""
    state = seed(store)
    epoch = 0
    if not first:
        epoch = store.acquire_lease("ag_1", "w-old", TTL, T0).epoch
    before = everything(store, "ag_1")
    with connect() as other:
        other.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        other.autocommit = False
        # an acquisition in the middle of its transaction, as acquire_lease makes it
        other.execute("SELECT 1 FROM agents WHERE agent_id = 'ag_1' FOR UPDATE")
        other.execute(
            "INSERT INTO leases VALUES ('ag_1', 'w-new', %s, %s) ON CONFLICT (agent_id) "
            "DO UPDATE SET owner = 'w-new', epoch = leases.epoch + 1",
            (epoch + 1, T0 + 2 * TTL),
        )
        outcome: list[Any] = []

        def write() -> None:
            try:
                outcome.append(store.commit(state, memory(1), epoch=epoch, at=T0 + 1))
            except SteadError as exc:
                outcome.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(0.5)
        assert writer.is_alive(), "the write went ahead without waiting for the row lock"
        other.commit()
        writer.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], StaleEpoch), outcome
    assert everything(store, "ag_1") == before


def test_concurrent_acquires_from_several_workers_at_most_one_wins(
    workers: Callable[[int], list[PostgresStore]],
) -> None:
    stores = workers(6)
    for round_no in range(5):
        agent_id = f"ag_{round_no}"
        seed(stores[0], agent_id)
        # a free agent, then one whose lease expired
        for epoch, now in enumerate((T0, T0 + 2 * TTL), start=1):
            results = together(
                *[
                    partial(s.acquire_lease, agent_id, f"w{i}", TTL, now)
                    for i, s in enumerate(stores)
                ]
            )
            won = [r for r in results if isinstance(r, Lease)]
            assert len(won) == 1, results
            assert all(isinstance(r, LeaseHeld) for r in results if r is not won[0])
            assert won[0].epoch == epoch and won[0].expires_at == now + TTL
            assert {s.get_lease(agent_id) for s in stores} == {won[0]}


def batches(states: list[State], n: int) -> list[Batch]:
    """One batch for each agent, each continuing its agent's chain from ``states``."""
    out = []
    for st in states:
        evs = seal(st.agent_id, st.version + 1, st.head_hash, T0 + 9, 0, memory(n))
        out.append(Batch(evs, fold(evs, st), st.version, 0))
    return out


def test_group_commits_of_one_set_of_agents_in_opposite_orders_do_not_deadlock(
    workers: Callable[[int], list[PostgresStore]],
) -> None:
    a, b = workers(2)
    for round_no in range(5):
        ids = [f"ag_{round_no}_x", f"ag_{round_no}_y", f"ag_{round_no}_z"]
        states = [seed(a, agent_id) for agent_id in ids]

        ones, twos = batches(states, 1), batches(states, 2)
        first, second = together(
            lambda ones=ones: a.append_many(ones, T0 + 9),
            lambda twos=twos: b.append_many(list(reversed(twos)), T0 + 9),
        )
        assert isinstance(first, list) and isinstance(second, list), (first, second)
        for agent_id, mine, theirs in zip(ids, first, reversed(second), strict=True):
            assert (mine is None) != (theirs is None), (agent_id, mine, theirs)
            assert isinstance(mine or theirs, VersionConflict)
            assert a.load_state(agent_id).version == 6


# -- the URL -----------------------------------------------------------------------------


def test_open_store_gives_a_store_in_the_schema_the_url_names(schema: str, raw: Raw) -> None:
    for scheme in ("postgresql", "postgres"):
        url = url_for(schema).replace("postgresql://", f"{scheme}://", 1)
        with open_store(url) as s:
            assert isinstance(s, PostgresStore)
            assert s.where.endswith(f"?schema={schema}")
            seed(s, f"ag_{scheme}")
    assert raw.execute("SELECT COUNT(*) FROM agents").fetchone() == (2,)


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("postgresql://h/db?schema=Bad-Name", "not a plain schema name"),
        ("postgresql://h/db?schema=", "not a plain schema name"),
        ("postgresql://h/db?schema=x;drop", "not a plain schema name"),
        ("postgresql://h/db?pool_max=0", "pool_max"),
        ("postgresql://h/db?pool_max=many", "pool_max"),
        ("postgresql://h/db?no_such_libpq_param=1", "cannot use the store URL"),
    ],
)
def test_a_url_stead_cannot_use_is_a_usage_error(url: str, hint: str) -> None:
    with pytest.raises(UsageError, match=hint):
        open_store(url)


def test_the_url_keeps_libpq_s_parameters_and_hides_the_password() -> None:
    target = parse(
        "postgresql://ana:s3cret@db.example:6543/prod?schema=tenant_a&pool_max=4"
        "&sslmode=require&options=-c%20work_mem%3D64MB"
    )
    assert (target.schema, target.pool_max) == ("tenant_a", 4)
    assert target.where == "postgresql://db.example:6543/prod?schema=tenant_a"
    params = psycopg.conninfo.conninfo_to_dict(target.conninfo)
    assert params["sslmode"] == "require" and params["password"] == "s3cret"
    assert params["options"] == (
        "-c work_mem=64MB -c search_path=tenant_a -c idle_in_transaction_session_timeout=5000"
    )
    assert params["application_name"] == "stead" and params["connect_timeout"] == "10"


def test_a_timeout_given_in_the_url_s_options_is_kept() -> None:
    target = parse("postgresql://h/db?options=-c%20idle_in_transaction_session_timeout%3D30000")
    params = psycopg.conninfo.conninfo_to_dict(target.conninfo)
    assert params["options"] == "-c idle_in_transaction_session_timeout=30000"


def test_a_writer_that_stops_inside_its_transaction_loses_its_row_locks(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker stopped (or cut off) right after sending a commit's events holds the
    agent's row locked; claims skip locked rows, so the server must end that session
    for another worker to take the agent over. It does, once the session has sat idle
    in its transaction past the timeout, and nothing of the write is stored."""
    url = url_for(schema, options="-c%20idle_in_transaction_session_timeout%3D300")
    store = PostgresStore(url)
    state = seed(store)
    sent = threading.Event()
    write_group = postgres._group_write

    def write_then_stall(db: Any, rows: str, channel: str) -> None:
        write_group(db, rows, channel)
        sent.set()
        threading.Event().wait(3.0)  # the worker is stopped here

    monkeypatch.setattr(postgres, "_group_write", write_then_stall)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            store.commit(state, memory(1), epoch=0, at=T0 + 2)
        except BaseException as exc:
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert sent.wait(10)
        with connect() as other:
            other.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("SELECT 1 FROM agents WHERE agent_id = 'ag_1' FOR UPDATE NOWAIT")
            other.rollback()
            other.execute("SET lock_timeout = '2s'")
            locked = other.execute("SELECT version FROM agents WHERE agent_id = 'ag_1' FOR UPDATE")
            assert locked.fetchone() == (state.version,)
            other.rollback()
    finally:
        writer.join(10)
        store.close()
    assert len(failed) == 1 and isinstance(failed[0], StoreUnusable), failed
    with PostgresStore(url) as again:
        assert again.load_state("ag_1").version == state.version
        assert len(list(again.read_events("ag_1"))) == state.version


def _end_sessions(application_name: str) -> int:
    """End every server session of ``application_name``, as a restart would."""
    with connect() as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (application_name,),
        ).fetchone()
    return int(ended[0]) if ended else 0


def test_reads_and_lease_renewals_meet_a_restart_once_not_as_a_failure(schema: str) -> None:
    """Every pooled connection ended under the store (a restart, a failover): the next
    read is asked again on a fresh connection, as is a lease's renewal; a commit of
    events is not, since whether it was stored is not known, and it fails."""
    with PostgresStore(url_for(schema, application_name="restarted", pool_max="3")) as store:
        state = seed(store)
        lease = store.acquire_lease("ag_1", "w1", TTL, T0 + 2)
        for read in (
            lambda: store.load_state("ag_1").version,
            lambda: len(list(store.read_events("ag_1"))),
            lambda: store.get_record("ag_1").tenant,
            lambda: store.renew_lease(lease, TTL, T0 + 3).expires_at,
            lambda: store.renew_leases([lease], TTL, T0 + 4)[0] is not None,
            lambda: store.agents_to_run(T0 + 5),
            lambda: store.signals("ag_1"),
        ):
            expected = read()
            assert _end_sessions("restarted") >= 1
            assert read() == expected
        assert _end_sessions("restarted") >= 1
        with pytest.raises(StoreUnusable, match="cannot be used"):
            store.commit(state, memory(1), epoch=lease.epoch, at=T0 + 6)
        assert store.load_state("ag_1").version == state.version


def test_a_server_that_does_not_answer_is_refused_as_unusable() -> None:
    with pytest.raises(StoreUnusable, match=r"127\.0\.0\.1:1/test.*cannot be used"):
        open_store("postgresql://postgres@127.0.0.1:1/test?schema=nowhere")


def test_the_pool_opens_at_most_pool_max_connections(schema: str) -> None:
    with PostgresStore(url_for(schema, pool_max="2")) as s:
        seed(s)
        got = together(*[lambda: s.load_state("ag_1").version for _ in range(6)])
        assert got == [5] * 6
        assert s._pool.get_stats()["pool_max"] == 2


def test_an_acquisition_waits_for_a_write_in_progress(store: PostgresStore, schema: str) -> None:
    """The new holder of a lease sees every write that was under way when it asked."""
    seed(store)
    with connect() as other:
        other.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        other.autocommit = False
        # a write in the middle of its transaction, as _write makes it
        other.execute("SELECT version FROM agents WHERE agent_id = 'ag_1' FOR UPDATE")
        other.execute("UPDATE agents SET version = 6 WHERE agent_id = 'ag_1'")
        got: list[Any] = []
        taker = threading.Thread(
            target=lambda: got.append(store.acquire_lease("ag_1", "w2", TTL, T0 + 2))
        )
        taker.start()
        taker.join(0.5)
        assert taker.is_alive(), "the lease was taken while a write was under way"
        other.commit()
        taker.join(10)
    assert [lease.epoch for lease in got] == [1]
