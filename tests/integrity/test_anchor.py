"""A journal or state row that does not match its last commit is refused before any step.

Each attack edits the SQLite file with a separate connection, the way someone
with access to the database could; then a person's input (``send``) or a
resume must be refused, naming the agent, before anything is appended.
Anchors signed with the agent's key (when it has one in the vault) also catch
a journal that was rewritten and re-hashed together with its state row.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Runtime, parse_spec
from stead.canonical import dumps
from stead.errors import IntegrityError, SecretError, StaleEpoch
from stead.governance.identity import IDENTITY_SECRET
from stead.integrity import anchoring
from stead.integrity.anchoring import Signer, check_before_run
from stead.integrity.audit import audit
from stead.integrity.keys import ensure_identity
from stead.journal import GENESIS_HASH, Event, event_hash
from stead.sandbox.secrets import Vault
from stead.state import fold
from stead.store.anchors import Anchor, state_digest
from stead.store.codec import unpack
from stead.store.sqlite import SqliteStore

SCRIPT = (
    "- {tool: write_file, args: {path: note.txt, content: hello}}\n"
    "- {remember: {colour: blue}}\n"
    "- {wait_for_input: 'next?'}\n"
    "- {remember: {answer: got it}}\n"
    "- {wait_for_input: 'more?'}\n"
    "- {finish: done}\n"
)
KEY = base64.b64encode(os.urandom(32))


def make(tmp_path: Path, *, keyed: bool = False) -> tuple[Runtime, str, Path]:
    """An agent run once through the runtime; waiting for input, its journal committed."""
    (tmp_path / "s.yaml").write_text(SCRIPT)
    db = tmp_path / "s.db"
    rt = Runtime(
        SqliteStore(db),
        tmp_path / "data",
        clock=FakeClock(),
        secret_key=base64.b64decode(KEY) if keyed else None,
    )
    spec = {"name": "a", "model": "scripted:s.yaml", "tools": ["write_file"]}
    agent = rt.create(parse_spec(spec, tmp_path)).agent_id
    if keyed:
        ensure_identity(rt, agent)  # an identity key in the vault: its commits are signed
    rt.run(agent)
    assert rt.store.load_state(agent).status == "waiting"
    return rt, agent, db


def rows(db: Path, agent: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as con:
        found = con.execute(
            "SELECT seq, kind, at, data, prev_hash, hash, epoch FROM events "
            "WHERE agent_id = ? ORDER BY seq",
            (agent,),
        ).fetchall()
    con.close()
    # the data as text, whether it is stored compressed or not (stead.store.codec)
    return [(*r[:3], unpack(r[3], f"event {r[0]}"), *r[4:]) for r in found]


def sql(db: Path, statement: str, *params: Any) -> None:
    with sqlite3.connect(db) as con:
        con.execute(statement, params)
    con.close()


def last_of(db: Path, agent: str, kind: str) -> int:
    return max(int(r[0]) for r in rows(db, agent) if r[1] == kind)


def assert_refused(rt: Runtime, agent: str, act: Callable[[], Any], *words: str) -> str:
    before = rt.store.load_state(agent).version
    with pytest.raises(IntegrityError) as err:
        act()
    text = str(err.value)
    assert f"agent {agent}" in text and f"stead audit verify {agent}" in text, text
    for w in words:
        assert w in text, text
    assert rt.store.load_state(agent).version == before  # nothing was appended
    assert rt.store.get_lease(agent) is None or not rt.store.get_lease(agent).live(  # type: ignore[union-attr]
        rt.clock.now()
    )
    return text


# -- item: a journal that does not verify does not run ------------------------------


def test_an_intact_agent_resumes_and_verifies(tmp_path: Path) -> None:
    rt, agent, _ = make(tmp_path)
    rt.send(agent, "go on")
    rt.run(agent)
    assert rt.store.load_state(agent).memory["answer"] == "got it"
    report = audit(rt.store, agent)
    assert report.ok and not report.anchored and "not anchored" in report.anchor


def test_a_one_byte_edit_of_an_event_is_refused_before_send(tmp_path: Path) -> None:
    rt, agent, db = make(tmp_path)
    seq = last_of(db, agent, "memory_written")
    data = next(r[3] for r in rows(db, agent) if r[0] == seq)
    sql(
        db,
        "UPDATE events SET data = ? WHERE agent_id = ? AND seq = ?",
        data.replace("blue", "blua"),
        agent,
        seq,
    )
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), f"event {seq} does not verify")
    assert_refused(rt, agent, lambda: rt.run(agent), f"event {seq}")


def test_a_deleted_event_is_refused(tmp_path: Path) -> None:
    rt, agent, db = make(tmp_path)
    seq = last_of(db, agent, "memory_written")
    sql(db, "DELETE FROM events WHERE agent_id = ? AND seq = ?", agent, seq)
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), f"event {seq + 1} does not verify")


def test_two_swapped_events_are_refused(tmp_path: Path) -> None:
    rt, agent, db = make(tmp_path)
    seq = last_of(db, agent, "memory_written")
    a, b = (r for r in rows(db, agent) if r[0] in (seq, seq + 1))
    for row, other in ((a, b), (b, a)):
        sql(
            db,
            "UPDATE events SET kind = ?, at = ?, data = ?, prev_hash = ?, hash = ? "
            "WHERE agent_id = ? AND seq = ?",
            *other[1:6],
            agent,
            row[0],
        )
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), f"event {seq}")


def test_an_edited_state_row_is_refused_and_not_carried_forward(tmp_path: Path) -> None:
    rt, agent, db = make(tmp_path)
    with sqlite3.connect(db) as con:
        (text,) = con.execute("SELECT state FROM agents WHERE agent_id = ?", (agent,)).fetchone()
        state = json.loads(unpack(text, "the state row"))
        state["memory"]["colour"] = "red"
        con.execute("UPDATE agents SET state = ? WHERE agent_id = ?", (json.dumps(state), agent))
    con.close()
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), "differs from the journal in memory")
    assert_refused(rt, agent, lambda: rt.run(agent), "memory")
    assert rt.store.load_state(agent).memory["colour"] == "red"  # nothing ran on it
    assert not audit(rt.store, agent).ok


def test_resuming_checks_only_the_events_since_the_last_check(tmp_path: Path) -> None:
    """The cost of the check is the last activation's events, not the whole history."""
    rt, agent, _ = make(tmp_path)
    first = rt.store.get_anchor(agent)
    assert first is not None and first.verified == 2  # creation events, checked in full
    version = rt.store.load_state(agent).version
    rt.send(agent, "go on")
    anchor = rt.store.get_anchor(agent)
    assert anchor is not None and anchor.verified == version  # what `run` wrote: checked
    checked, reads = reads_of_check(rt, agent)
    assert checked == anchor.version
    assert reads == [version]  # only what `send` wrote since `run` was checked


def reads_of_check(rt: Runtime, agent: str) -> tuple[int, list[int]]:
    """What the check before a run returns, and the seqs it reads events from."""
    reads: list[int] = []
    real = rt.store.read_events

    def counting(agent_id: str, from_seq: int = 1, to_seq: int | None = None) -> Any:
        reads.append(from_seq)
        return real(agent_id, from_seq, to_seq)

    rt.store.read_events = counting  # type: ignore[method-assign]
    try:
        return check_before_run(rt.store, rt.store.load_state(agent), None), reads
    finally:
        rt.store.read_events = real  # type: ignore[method-assign]


def test_a_long_activation_leaves_the_next_check_a_bounded_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An activation advances the checked seq as it commits, keeping only its newest
    events for the next check: an edit among them is still refused at once, an edit
    of an older one of its events is left to the audit."""
    monkeypatch.setattr(anchoring, "RECHECKED", 12)
    many = "".join(f"- {{remember: {{k{i}: v{i}}}}}\n" for i in range(20))
    (tmp_path / "s.yaml").write_text(many + "- {wait_for_input: 'next?'}\n- {finish: done}\n")
    db = tmp_path / "s.db"
    rt = Runtime(SqliteStore(db), tmp_path / "data", clock=FakeClock())
    spec = {"name": "a", "model": "scripted:s.yaml", "tools": []}
    agent = rt.create(parse_spec(spec, tmp_path)).agent_id
    rt.run(agent)
    version = rt.store.load_state(agent).version
    anchor = rt.store.get_anchor(agent)
    assert version > 40 and anchor is not None
    assert anchor.verified == version - 12  # not 2, where the activation began
    assert reads_of_check(rt, agent)[1] == [version - 12]

    def edit(seq: int) -> None:
        data = next(r[3] for r in rows(db, agent) if r[0] == seq)
        sql(db, "UPDATE events SET data = ? WHERE agent_id = ? AND seq = ?",
            data.replace('"v', '"w'), agent, seq)  # fmt: skip

    written = [int(r[0]) for r in rows(db, agent) if r[1] == "memory_written"]
    recent = next(s for s in reversed(written) if s > version - 12)
    edit(recent)
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), f"event {recent} does not verify")
    edit_back = next(r[3] for r in rows(db, agent) if r[0] == recent).replace('"w', '"v')
    sql(db, "UPDATE events SET data = ? WHERE agent_id = ? AND seq = ?", edit_back, agent, recent)

    old = written[0]  # of the same activation, but behind the tail it left
    edit(old)
    rt.send(agent, "hi")  # not checked again by the next activation...
    report = audit(rt.store, agent)
    assert not report.ok and report.bad_event == old  # ...but the audit finds it


# -- item: an anchored chain cannot be re-hashed -------------------------------------


def rehash(db: Path, agent: str, keep: Callable[[list[Event]], list[Event]]) -> None:
    """Rewrite the journal as ``keep`` says, re-hash it, refold the state row and fix the
    anchor's version, head and state hash: everything but a signature needs no key."""
    events = [
        Event(agent, int(s), k, at, json.loads(d), p, h, e, d)
        for s, k, at, d, p, h, e in rows(db, agent)
    ]
    prev, out = GENESIS_HASH, []
    for i, ev in enumerate(keep(events), start=1):
        data = dumps(dict(ev.data))
        h = event_hash(agent, i, ev.kind, ev.at, data, prev)
        out.append(Event(agent, i, ev.kind, ev.at, ev.data, prev, h, ev.epoch, data))
        prev = h
    state = fold(out)
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM events WHERE agent_id = ?", (agent,))
        con.executemany(
            "INSERT INTO events (agent_id, seq, kind, at, data, prev_hash, hash, epoch) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(agent, e.seq, e.kind, e.at, e.data_json, e.prev_hash, e.hash, e.epoch) for e in out],
        )
        con.execute(
            "UPDATE agents SET state = ?, version = ? WHERE agent_id = ?",
            (dumps(state.to_json()), state.version, agent),
        )
        con.execute(
            "UPDATE anchors SET version = ?, head_hash = ?, state_hash = ? WHERE agent_id = ?",
            (state.version, state.head_hash, state_digest(state), agent),
        )
    con.close()


def _edit_memory(events: list[Event]) -> list[Event]:
    out = []
    for ev in events:
        if ev.kind == "memory_written":
            ev = Event(
                ev.agent_id,
                ev.seq,
                ev.kind,
                ev.at,
                {**ev.data, "values": {"colour": "red"}},
                ev.prev_hash,
                ev.hash,
                ev.epoch,
            )
        out.append(ev)
    return out


ATTACKS: dict[str, Callable[[list[Event]], list[Event]]] = {
    "edit-and-rehash": _edit_memory,
    "cut-the-tail": lambda evs: evs[:-2],
    "drop-a-grant": lambda evs: [e for e in evs if e.kind != "grant_added"],
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_rehashed_journal_of_an_agent_with_a_key_is_refused_and_fails_the_audit(
    tmp_path: Path, attack: str
) -> None:
    rt, agent, db = make(tmp_path, keyed=True)
    anchor = rt.store.get_anchor(agent)
    assert anchor is not None and anchor.signed
    report = audit(rt.store, agent, vault=rt.vault())
    assert report.ok and report.anchored and "signed by its key from the vault" in report.anchor
    rehash(db, agent, ATTACKS[attack])
    assert audit(rt.store, agent).ok is False  # the journal's own key is enough here
    bad = audit(rt.store, agent, vault=rt.vault())
    assert not bad.ok and "does not verify with the agent's identity key" in bad.reason
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), "signature on its last commit")


def test_a_stripped_signature_is_refused(tmp_path: Path) -> None:
    rt, agent, db = make(tmp_path, keyed=True)
    sql(db, "UPDATE anchors SET signature = '', public_key = '' WHERE agent_id = ?", agent)
    assert_refused(rt, agent, lambda: rt.run(agent), "not signed by its identity key")
    assert "is not signed" in audit(rt.store, agent, vault=rt.vault()).reason


def test_a_journal_re_signed_with_a_new_key_passes_only_without_the_vault(tmp_path: Path) -> None:
    """Someone who rewrites the journal's key and signs with their own is caught by the vault."""
    rt, agent, db = make(tmp_path, keyed=True)
    forger = Signer.from_private(os.urandom(32).hex())

    def new_key(events: list[Event]) -> list[Event]:
        return [
            Event(
                e.agent_id,
                e.seq,
                e.kind,
                e.at,
                {**e.data, "public_key": forger.public_hex},
                e.prev_hash,
                e.hash,
                e.epoch,
            )
            if e.kind == "identity_created"
            else e
            for e in _edit_memory(events)
        ]

    rehash(db, agent, new_key)
    state = rt.store.load_state(agent)
    kept = rt.store.get_anchor(agent)  # the spec and epoch it pins, re-signed with the rest
    assert kept is not None
    signed = forger.sign(
        Anchor.of(state, state.version, spec_hash=kept.spec_hash, epoch=kept.epoch)
    )
    sql(
        db,
        "UPDATE anchors SET verified = ?, public_key = ?, signature = ? WHERE agent_id = ?",
        signed.verified,
        signed.public_key,
        signed.signature,
        agent,
    )
    assert audit(rt.store, agent).ok  # the documented limit: the journal names the key
    bad = audit(rt.store, agent, vault=rt.vault())
    assert not bad.ok and "not the one in the vault" in bad.reason
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), "not the one in the vault")


def test_an_agent_with_a_key_runs_signed_and_is_refused_without_the_vault_key(
    tmp_path: Path,
) -> None:
    rt, agent, db = make(tmp_path, keyed=True)
    rt.send(agent, "go on")
    rt.run(agent)
    anchor = rt.store.get_anchor(agent)
    assert anchor is not None and anchor.signed
    assert anchor.public_key == rt.store.load_state(agent).public_key
    rt.close()
    keyless = Runtime(SqliteStore(db), tmp_path / "data", clock=FakeClock())
    with pytest.raises(SecretError, match="no vault key"):
        keyless.send(agent, "more")
    keyless.close()


def test_the_vault_key_is_needed_only_for_agents_with_an_identity(tmp_path: Path) -> None:
    rt, agent, db = make(tmp_path)
    rt.close()
    with_vault = Runtime(
        SqliteStore(db), tmp_path / "data", clock=FakeClock(), secret_key=base64.b64decode(KEY)
    )
    with_vault.send(agent, "go on")  # no identity: not anchored, still runs
    with_vault.run(agent)
    report = audit(with_vault.store, agent, vault=Vault(with_vault.store, base64.b64decode(KEY)))
    assert report.ok and not report.anchored and "no identity key" in report.anchor
    with_vault.close()


# -- item: the workspace is compared with the last committed manifest -----------------


def test_a_workspace_changed_after_the_last_commit_fails_the_audit(tmp_path: Path) -> None:
    rt, agent, _ = make(tmp_path)
    ws = rt.workspace(agent, "default")
    assert audit(rt.store, agent, workspace=ws, now=rt.clock.now()).ok
    (ws.root / "note.txt").write_text("rewritten by a stale worker")
    (ws.root / "extra.txt").write_text("new")
    report = audit(rt.store, agent, workspace=ws, now=rt.clock.now())
    assert not report.ok and report.drift == ("extra.txt", "note.txt")
    assert "changed note.txt" in report.reason and "added extra.txt" in report.reason
    (ws.root / "note.txt").unlink()
    (ws.root / "extra.txt").unlink()
    report = audit(rt.store, agent, workspace=ws, now=rt.clock.now())
    assert not report.ok and "removed note.txt" in report.reason


def test_a_deleted_anchor_of_an_agent_with_a_key_is_refused(tmp_path: Path) -> None:
    rt, agent, db = make(tmp_path, keyed=True)
    rehash(db, agent, _edit_memory)
    sql(db, "DELETE FROM anchors WHERE agent_id = ?", agent)
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), "left no anchor")
    assert "no anchor" in audit(rt.store, agent).reason


def test_a_key_whose_identity_was_never_committed_is_dropped_and_the_agent_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Minting seals the key in the vault first; if the journal write then fails, the
    key must go too, or the agent's unsigned anchors would look stripped for ever."""
    rt, agent, _db = make(tmp_path, keyed=False)
    monkeypatch.setenv("STEAD_SECRET_KEY", KEY.decode())  # the vault this runtime opens

    def refused(*args: Any, **kwargs: Any) -> None:
        raise StaleEpoch("another worker took over")

    with monkeypatch.context() as m:
        m.setattr(rt.store, "append", refused)
        with pytest.raises(StaleEpoch):
            ensure_identity(rt, agent)
    state = rt.store.load_state(agent)
    assert state.public_key is None
    assert rt.vault().get(state.tenant, agent, IDENTITY_SECRET) is None
    rt.send(agent, "go on")  # still runs: nothing names a key it cannot show
    assert audit(rt.store, agent, vault=rt.vault()).ok


CREATION = {"agent_created", "grant_added", "identity_created"}


def test_a_keyed_journal_cut_back_to_its_creation_without_its_anchor_is_refused(
    tmp_path: Path,
) -> None:
    """Cut the journal back to what creation wrote, delete the anchor: it looks new.

    Every agent created with a vault key has its identity from its first event
    batch and a signed anchor from its creation, so no keyed agent is ever
    legitimately without an anchor.
    """
    rt, agent, db = make(tmp_path, keyed=True)
    rehash(db, agent, lambda evs: [e for e in evs if e.kind in CREATION])
    sql(db, "DELETE FROM anchors WHERE agent_id = ?", agent)
    assert {r[1] for r in rows(db, agent)} == CREATION
    assert_refused(rt, agent, lambda: rt.send(agent, "hi"), "left no anchor")
    assert "no anchor" in audit(rt.store, agent, vault=rt.vault()).reason


def test_an_agent_created_with_a_vault_key_is_keyed_and_anchored_from_its_creation(
    tmp_path: Path,
) -> None:
    (tmp_path / "s.yaml").write_text(SCRIPT)
    rt = Runtime(
        SqliteStore(tmp_path / "s.db"),
        tmp_path / "data",
        clock=FakeClock(),
        secret_key=base64.b64decode(KEY),
    )
    spec = {"name": "a", "model": "scripted:s.yaml", "tools": ["write_file"]}
    state = rt.create(parse_spec(spec, tmp_path))
    assert state.public_key is not None
    anchor = rt.store.get_anchor(state.agent_id)
    assert anchor is not None and anchor.signed and anchor.version == state.version
    assert anchor.public_key == state.public_key
    report = audit(rt.store, state.agent_id, vault=rt.vault())
    assert report.ok and "signed by its key from the vault" in report.anchor
    rt.run(state.agent_id)
    assert rt.store.load_state(state.agent_id).status == "waiting"
    rt.close()
