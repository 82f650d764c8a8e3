"""A wake on another host: hibernated on one worker, restored from shared blobs on another.

Each "host" is a runtime with a data folder of its own (its workspaces, and
its local blob folder if it has no ``--blobs``), sharing the journal store and
the blob store URL: an S3 bucket beside a SQLite file, or PostgreSQL holding
both. A host that names no shared blob store cannot restore the agent, and
says so without consuming the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from stead import Kind, Runtime
from stead.errors import ArchiveError, NotFound
from tests import postgres, s3
from tests.cli.test_governance_cli import run_text, write_agent

from ..runtime.conftest import make_agent

FILES = {
    "README.md": "# plan\n" + "step one\n" * 200,
    "src/app.py": "def main():\n    return 42\n" * 50,
    "data/table.csv": "a,b\n" + "1,2\n" * 300,
}
SCRIPT = [
    *({"tool": "write_file", "args": {"path": p, "content": c}} for p, c in FILES.items()),
    {"wait_for_input": "what next?"},
    {"tool": "read_file", "args": {"path": "src/app.py"}},
    {"finish": "done"},
]


@pytest.fixture(params=["sqlite+s3", "postgres+postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(journal store URL, blob store URL) that every host names."""
    with ExitStack() as cleanup:
        if request.param == "sqlite+s3":
            endpoint = request.getfixturevalue("s3_endpoint")
            bucket = cleanup.enter_context(s3.fresh_bucket(endpoint))
            yield f"sqlite:///{tmp_path / 'shared' / 'stead.db'}", s3.url_for(bucket, endpoint)
        else:
            url = postgres.url_for(cleanup.enter_context(postgres.fresh_schema()))
            yield url, url  # the journal and the blobs in one schema


def host(tmp_path: Path, name: str, store: str, blobs: str | None) -> Runtime:
    return Runtime(store, tmp_path / name, blobs=blobs)


def files_of(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def hibernated_on_host_a(tmp_path: Path, store: str, blobs: str) -> str:
    a = host(tmp_path, "host-a", store, blobs)
    try:
        agent = make_agent(a, tmp_path, SCRIPT)
        assert a.run(agent).state.status == "waiting"
        assert files_of(a.workspace(agent, "default").root) == FILES
        a.hibernate(agent)
        assert not a.workspace(agent, "default").root.exists()
    finally:
        a.close()
    # nothing of the agent's content stayed on host a: it is all in the shared store
    assert not list((tmp_path / "host-a").rglob("blobs/*/*/*"))
    return agent


def test_an_agent_hibernated_on_one_host_wakes_on_another(
    shared: tuple[str, str], tmp_path: Path
) -> None:
    store, blobs = shared
    agent = hibernated_on_host_a(tmp_path, store, blobs)

    b = host(tmp_path, "host-b", store, blobs)
    try:
        b.send(agent, "go on")  # wakes it; its next run, here, restores the snapshot
        out = b.run(agent)
        assert out.state.status == "completed"
        assert files_of(b.workspace(agent, "default").root) == FILES
        read = [c for c in out.state.recent_calls if c["tool"] == "read_file"]
        assert read and read[0]["ok"]
        kinds = [e.kind for e in b.store.read_events(agent)]
        assert kinds.count(Kind.RESTORED) == 1
    finally:
        b.close()


def test_a_host_without_the_shared_blob_store_says_where_to_point_it(
    shared: tuple[str, str], tmp_path: Path
) -> None:
    store, blobs = shared
    agent = hibernated_on_host_a(tmp_path, store, blobs)

    lost = host(tmp_path, "host-c", store, None)  # its own, empty, local blob folder
    try:
        with pytest.raises(ArchiveError) as info:
            lost.wake(agent)
        message = str(info.value)
        assert isinstance(info.value.__cause__, NotFound)
        assert any(f"blob {d} is not in the local blob folder" in message for d in
                   lost.store.load_state(agent).manifest.values())  # fmt: skip
        assert "--blobs URL" in message and "another host" in message
        assert "not consumed" in message
        state = lost.store.load_state(agent)
        assert state.status == "hibernated"
        assert not lost.workspace(agent, "default").root.exists()
    finally:
        lost.close()

    # nothing was spent: a host that names the shared blob store wakes it
    b = host(tmp_path, "host-b", store, blobs)
    try:
        assert b.wake(agent).status == "waiting"
        assert files_of(b.workspace(agent, "default").root) == FILES
    finally:
        b.close()


@pytest.mark.parametrize("how", ["--blobs", "$STEAD_BLOBS"])
def test_the_command_line_wakes_it_on_another_host(
    shared: tuple[str, str],
    tmp_path: Path,
    how: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, blobs = shared
    spec = write_agent(tmp_path, SCRIPT)
    where_a = ["--store", store, "--data-dir", str(tmp_path / "host-a"), "--blobs", blobs]
    code, out, err = run_text(capsys, "run", str(spec), "--id", "ag_far", *where_a)
    assert code == 3, out + err
    code, out, err = run_text(capsys, "hibernate", "ag_far", *where_a)
    assert code == 0, out + err

    where_b = ["--store", store, "--data-dir", str(tmp_path / "host-b")]
    code, out, err = run_text(capsys, "wake", "ag_far", *where_b)
    assert code != 0 and "--blobs URL" in err  # no shared blobs named: refused, unchanged
    if how == "--blobs":
        where_b += ["--blobs", blobs]
    else:
        monkeypatch.setenv("STEAD_BLOBS", blobs)
    code, out, err = run_text(capsys, "wake", "ag_far", *where_b)
    assert code == 3 and "waiting" in out, out + err
    assert files_of(tmp_path / "host-b" / "workspaces" / "default" / "ag_far") == FILES


def test_two_hosts_restoring_one_snapshot_at_once_exactly_one_wins(tmp_path: Path) -> None:
    """Two workers on two hosts wake the same hibernated agent at the same moment:
    the snapshot is consumed once, by one of them; the other is refused."""
    import threading

    from stead.errors import LeaseHeld, SnapshotConsumed, StoreError

    with ExitStack() as cleanup:
        url = postgres.url_for(cleanup.enter_context(postgres.fresh_schema()))
        agent = hibernated_on_host_a(tmp_path, url, url)
        hosts = [host(tmp_path, name, url, url) for name in ("host-b", "host-c")]
        gate = threading.Barrier(len(hosts))
        outcome: dict[str, str] = {}

        def wake(rt: Runtime, name: str) -> None:
            gate.wait()
            try:
                rt.wake(agent)
                outcome[name] = "restored"
            except (SnapshotConsumed, LeaseHeld, StoreError) as exc:
                outcome[name] = f"refused: {type(exc).__name__}"

        threads = [threading.Thread(target=wake, args=(rt, n))
                   for rt, n in zip(hosts, ("b", "c"), strict=True)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            refused, restored = sorted(outcome.values())
            assert restored == "restored" and refused.startswith("refused: "), outcome
            kinds = [e.kind for e in hosts[0].store.read_events(agent)]
            assert kinds.count(Kind.RESTORED) == 1
            (snapshot,) = hosts[0].store.list_snapshots(agent)
            assert snapshot.consumed_at is not None
        finally:
            for rt in hosts:
                rt.close()
