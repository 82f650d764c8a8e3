"""The journal: events, their JSON form, sealing, and the hash chain.

The golden file ``tests/golden/journal_v1.jsonl`` is a small sealed journal in the
exact form ``Event.to_json`` writes, one canonical-JSON event per line. It pins the
hash format: if a change to ``event_hash``, ``seal`` or canonical JSON alters the
hash of any event ever written, ``test_golden_journal_v1_still_verifies`` fails.

Never regenerate it to make a failing test pass: a failure means journals that
are already stored would stop verifying. Regenerate only when the hash format is
changed on purpose, and then as a new format version, keeping v1 and its test:

    .venv/bin/python tests/test_journal.py --write-golden tests/golden/journal_v2.jsonl

prints the head hash to record beside the new file's test (the bare
``--write-golden`` rewrites v1, for when the file has to be recreated as it was).
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import replace
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stead.canonical import dumps, loads
from stead.journal import GENESIS_HASH, Event, Kind, NewEvent, event_hash, seal, verify_chain

GOLDEN_V1 = Path(__file__).parent / "golden" / "journal_v1.jsonl"
GOLDEN_V1_HEAD = "302e0d1679827cc1b22992dfaa4503ef758a481eb75bf6e6f7bc042e632eecb9"

# -- strategies ------------------------------------------------------------------------

# enough examples to find a broken chain, few enough to keep the suite fast
FAST = settings(max_examples=50)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=5,
)
event_data = st.dictionaries(st.text(max_size=8), json_values, max_size=3)
kinds = st.sampled_from([k.value for k in Kind]) | st.text(min_size=1, max_size=12)
timestamps = st.floats(min_value=0, max_value=4e9, allow_nan=False)
hashes = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
new_events = st.builds(NewEvent, kind=kinds, data=event_data)
batches = st.tuples(timestamps, st.integers(0, 50), st.lists(new_events, min_size=1, max_size=3))


@st.composite
def journals(draw: st.DrawFn, min_events: int = 0) -> list[Event]:
    """A sealed journal built the way a store builds one: batch after batch."""
    agent_id = draw(st.text(min_size=1, max_size=10))
    events: list[Event] = []
    for at, epoch, batch in draw(st.lists(batches, min_size=1 if min_events else 0, max_size=4)):
        prev = events[-1].hash if events else GENESIS_HASH
        events += seal(agent_id, len(events) + 1, prev, at, epoch, batch)
    assume(len(events) >= min_events)
    return events


# -- the JSON form ---------------------------------------------------------------------


@FAST
@given(journals(min_events=1))
def test_event_json_round_trips(events: list[Event]) -> None:
    for ev in events:
        back = Event.from_json(loads(dumps(ev.to_json())))
        assert back == ev
        assert back.to_json() == ev.to_json()


@FAST
@given(journals())
def test_a_journal_exported_as_json_still_verifies(events: list[Event]) -> None:
    exported = [dumps(ev.to_json()) for ev in events]
    report = verify_chain(Event.from_json(loads(line)) for line in exported)
    assert report.ok, report.reason
    assert report.events == len(events)


def test_from_json_defaults_a_missing_epoch_to_zero() -> None:
    (ev,) = seal("ag", 1, GENESIS_HASH, 10.0, 7, [NewEvent("decision", {"a": 1})])
    obj = ev.to_json()
    del obj["epoch"]
    assert Event.from_json(obj).epoch == 0


def test_an_event_sealed_at_a_whole_number_timestamp_survives_json() -> None:
    # FakeClock(start=0) hands out ints; the exported journal must still verify
    events = seal("ag", 1, GENESIS_HASH, 1_767_225_600, 0, [NewEvent("decision", {"x": 1})])
    assert verify_chain(events).ok
    back = [Event.from_json(loads(dumps(ev.to_json()))) for ev in events]
    report = verify_chain(back)
    assert report.ok, f"event {report.bad_seq}: {report.reason}"


# -- sealing and verifying -------------------------------------------------------------


@FAST
@given(journals())
def test_sealed_journals_verify(events: list[Event]) -> None:
    report = verify_chain(events)
    assert report.ok, report.reason
    assert report.events == len(events)
    assert report.bad_seq is None
    assert report.head_hash == (events[-1].hash if events else GENESIS_HASH)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    for before, after in itertools.pairwise(events):
        assert after.prev_hash == before.hash


@FAST
@given(st.text(max_size=5), timestamps, st.lists(new_events, min_size=1, max_size=4))
def test_seal_numbers_from_start_seq_and_links_to_prev(
    agent_id: str, at: float, batch: list[NewEvent]
) -> None:
    prev = "f" * 64
    sealed = seal(agent_id, 41, prev, at, 3, batch)
    assert [e.seq for e in sealed] == list(range(41, 41 + len(batch)))
    assert sealed[0].prev_hash == prev
    assert all(e.agent_id == agent_id and e.at == at and e.epoch == 3 for e in sealed)
    assert [(e.kind, dict(e.data)) for e in sealed] == [(n.kind, dict(n.data)) for n in batch]
    for e in sealed:
        assert e.data_json == dumps(dict(e.data))
        assert e.hash == event_hash(agent_id, e.seq, e.kind, at, e.data_json, e.prev_hash)


@FAST
@given(journals(min_events=1), st.integers(0, 1000))
def test_the_epoch_is_not_part_of_the_hash(events: list[Event], epoch: int) -> None:
    refenced = [replace(e, epoch=epoch) for e in events]
    assert verify_chain(refenced).ok


def _tampered(ev: Event, field: str, draw: st.DrawFn) -> Event:
    if field == "data":
        new = draw(event_data)
        assume(dumps(new) != ev.data_json)
        return replace(ev, data=new, data_json=dumps(new))
    if field == "kind":
        new_kind = draw(kinds)
        assume(new_kind != ev.kind)
        return replace(ev, kind=new_kind)
    if field == "at":
        new_at = draw(timestamps)
        assume(dumps(new_at) != dumps(ev.at))
        return replace(ev, at=new_at)
    if field == "prev_hash":
        new_prev = draw(hashes)
        assume(new_prev != ev.prev_hash)
        return replace(ev, prev_hash=new_prev)
    if field == "hash":
        new_hash = draw(hashes)
        assume(new_hash != ev.hash)
        return replace(ev, hash=new_hash)
    if field == "agent_id":
        new_id = draw(st.text(min_size=1, max_size=10))
        assume(new_id != ev.agent_id)
        return replace(ev, agent_id=new_id)
    raise AssertionError(field)


@FAST
@given(
    journals(min_events=1),
    st.sampled_from(["data", "kind", "at", "prev_hash", "hash", "agent_id"]),
    st.data(),
)
def test_changing_any_one_event_is_reported_at_exactly_its_seq(
    events: list[Event], field: str, data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(events) - 1))
    tampered = [*events]
    tampered[i] = _tampered(events[i], field, data.draw)
    report = verify_chain(tampered)
    assert not report.ok
    assert report.bad_seq == events[i].seq
    assert report.events == i
    assert report.head_hash == (events[i - 1].hash if i else GENESIS_HASH)
    assert report.reason


@FAST
@given(journals(min_events=2), st.data())
def test_a_missing_event_is_reported(events: list[Event], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(events) - 2))
    report = verify_chain(events[:i] + events[i + 1 :])
    assert not report.ok
    assert report.bad_seq == events[i + 1].seq
    assert "missing" in report.reason


@FAST
@given(journals(min_events=2), st.data())
def test_swapped_events_are_reported(events: list[Event], data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(events) - 2))
    swapped = [*events]
    swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    report = verify_chain(swapped)
    assert (report.ok, report.bad_seq, report.events) == (False, events[i + 1].seq, i)


def test_the_stored_bytes_are_what_is_verified() -> None:
    (ev,) = seal("ag", 1, GENESIS_HASH, 1.0, 0, [NewEvent("decision", {"a": 1, "b": [2]})])
    assert ev.data_json == '{"a":1,"b":[2]}'
    # the same value written with other white space is a different stored text
    respaced = replace(ev, data_json='{"a": 1, "b": [2]}')
    assert respaced == ev  # data_json is not part of equality...
    assert verify_chain([respaced]).bad_seq == 1  # ...but it is what the hash covers


# -- the golden journal ----------------------------------------------------------------


def build_golden_journal() -> list[Event]:
    """The journal in journal_v1.jsonl: fixed ids, times and data, several kinds."""
    agent = "ag_01KDX3Q9E0GOLDEN0000000001"
    t0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    batches: list[tuple[float, int, list[NewEvent]]] = [
        (
            t0,
            0,
            [
                NewEvent(
                    Kind.AGENT_CREATED,
                    {
                        "tenant": "acme",
                        "name": "golden",
                        "goals": [{"id": "rename", "description": "Rename Cart → Basket"}],
                        "manifest": {"a.txt": "ab" * 32},
                    },
                )
            ],
        ),
        (t0 + 1.25, 1, [NewEvent(Kind.ACTIVATION_STARTED, {"worker": "w1", "epoch": 1})]),
        (
            t0 + 2.5,
            1,
            [
                NewEvent(
                    Kind.DECISION,
                    {
                        "step": 0,
                        "context_hash": "cd" * 32,
                        "actions": [
                            {"type": "tool", "tool": "write_file", "args": {"path": "a.txt"}},
                            {"type": "remember", "values": {"z": 1, "a": 0.5}},
                        ],
                    },
                ),
                NewEvent(
                    Kind.TOOL_INTENT,
                    {
                        "call_id": "c1",
                        "tool": "write_file",
                        "args": {"path": "a.txt", "content": "héllo\n"},
                        "effect": "idempotent",
                        "idempotency_key": "ag/c1",
                        "action": 0,
                    },
                ),
            ],
        ),
        (
            t0 + 3.0,
            1,
            [
                NewEvent(
                    Kind.TOOL_RESULT,
                    {
                        "call_id": "c1",
                        "tool": "write_file",
                        "args": {"path": "a.txt", "content": "héllo\n"},
                        "ok": True,
                        "output": {"path": "a.txt", "bytes": 7},
                        "error": None,
                        "action": 0,
                        "changed": {"a.txt": "ef" * 32},
                    },
                ),
                NewEvent(Kind.MEMORY_WRITTEN, {"values": {"z": 1, "a": 0.5}, "action": 1}),
                NewEvent(Kind.STEP_COMPLETED, {}),
            ],
        ),
        (t0 + 86_400.0, 2, [NewEvent(Kind.INPUT_RECEIVED, {"text": "继续 — go on"})]),
        (
            t0 + 86_401.5,
            2,
            [
                NewEvent(Kind.GOAL_COMPLETED, {"id": "rename"}),
                NewEvent(Kind.FINISH_CLAIMED, {"summary": "renamed"}),
            ],
        ),
    ]
    events: list[Event] = []
    for at, epoch, batch in batches:
        prev = events[-1].hash if events else GENESIS_HASH
        events += seal(agent, len(events) + 1, prev, at, epoch, batch)
    return events


def read_golden(path: Path) -> list[Event]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [Event.from_json(loads(line)) for line in lines]


def test_golden_journal_v1_still_verifies() -> None:
    events = read_golden(GOLDEN_V1)
    assert len(events) == 10
    assert len({e.kind for e in events}) == 10
    report = verify_chain(events)
    assert report.ok, f"event {report.bad_seq}: {report.reason}"
    assert report.events == 10
    assert report.head_hash == GOLDEN_V1_HEAD


def test_golden_journal_v1_is_what_seal_writes_today() -> None:
    # seal, to_json and canonical JSON must still produce the committed bytes
    lines = [dumps(ev.to_json()) for ev in build_golden_journal()]
    assert GOLDEN_V1.read_text(encoding="utf-8") == "\n".join(lines) + "\n"


def _write_golden(path: Path) -> None:
    events = build_golden_journal()
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(dumps(ev.to_json()) + "\n" for ev in events), encoding="utf-8")
    print(f"wrote {path} ({len(events)} events); head hash {events[-1].hash}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--write-golden"] or len(sys.argv) > 3:
        sys.exit(f"usage: {sys.argv[0]} --write-golden [PATH]   (read the module docstring first)")
    _write_golden(Path(sys.argv[2]) if len(sys.argv) == 3 else GOLDEN_V1)


@given(
    agent_id=st.text(max_size=20),
    seq=st.integers(min_value=1, max_value=10**9),
    kind=st.text(max_size=20),
    at=st.floats(min_value=0, max_value=4e9, allow_nan=False),
)
def test_the_hand_written_header_is_canonical_json(
    agent_id: str, seq: int, kind: str, at: float
) -> None:
    from stead.canonical import dumps, sha256_hex
    from stead.journal import event_hash

    header = dumps({"agent_id": agent_id, "seq": seq, "kind": kind, "at": float(at)})
    assert event_hash(agent_id, seq, kind, at, "{}", "p") == sha256_hex(f"p\n{header}\n{{}}")
