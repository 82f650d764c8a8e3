"""The materialised state and the pure fold that produces it from events."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stead.canonical import dumps, loads
from stead.journal import GENESIS_HASH, Event, Kind, NewEvent, seal
from stead.state import RECENT_CALLS, STATUSES, State, apply, fold

FAST = settings(max_examples=60)
T0 = 1_767_225_600.0

# -- strategies: event streams the runtime could write -----------------------------------

texts = st.text(max_size=8)
ids = st.text(alphabet="abcdef", min_size=1, max_size=2)
call_ids = st.sampled_from(["c1", "c2", "c3"])
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=5,
)
hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
manifest_delta = st.fixed_dictionaries(
    {},
    optional={
        "changed": st.dictionaries(ids.map(lambda s: f"{s}.txt"), hex64, max_size=3),
        "removed": st.lists(ids.map(lambda s: f"{s}.txt"), max_size=2),
    },
)


def ev(kind: str, **parts: Any) -> st.SearchStrategy[NewEvent]:
    return st.fixed_dictionaries(parts).map(lambda d: NewEvent(kind, d))


def ev_with(kind: str, base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[NewEvent]:
    return base.map(lambda d: NewEvent(kind, d))


actions = st.lists(
    st.fixed_dictionaries({"type": st.just("finish"), "summary": texts}), min_size=1, max_size=3
)
any_event = st.one_of(
    ev(Kind.ACTIVATION_STARTED, worker=texts),
    ev(Kind.WORKSPACE_RESTORED, changed=st.just({}), removed=st.just([])),
    ev(Kind.DECISION, step=st.integers(0, 9), context_hash=hex64, actions=actions),
    ev(
        Kind.TOOL_INTENT,
        call_id=call_ids,
        tool=texts,
        args=st.dictionaries(texts, json_values, max_size=2),
        effect=st.sampled_from(["idempotent", "effectful"]),
        idempotency_key=texts,
        action=st.integers(0, 3),
    ),
    ev_with(
        Kind.TOOL_RESULT,
        st.fixed_dictionaries(
            {
                "call_id": call_ids,
                "tool": texts,
                "args": st.dictionaries(texts, json_values, max_size=2),
                "ok": st.booleans(),
                "output": json_values,
                "error": st.none() | texts,
                "action": st.none() | st.integers(0, 3),
            }
        ).flatmap(lambda d: manifest_delta.map(lambda m: {**d, **m})),
    ),
    ev(Kind.RECONCILED, call_id=call_ids, verdict=st.sampled_from(["done", "not_done"])),
    ev(Kind.OUTCOME_UNKNOWN, call_id=call_ids, reason=texts),
    ev(
        Kind.CALL_RESOLVED,
        call_id=call_ids,
        resolution=st.sampled_from(["done", "abort", "retry"]),
        by=texts,
        action=st.integers(0, 3),
    ),
    ev(Kind.MEMORY_WRITTEN, values=st.dictionaries(texts, json_values, min_size=1, max_size=3)),
    ev(Kind.GOAL_PUSHED, id=ids, description=texts),
    ev(Kind.GOAL_COMPLETED, id=ids),
    ev(Kind.INPUT_REQUESTED, prompt=texts),
    ev(Kind.INPUT_RECEIVED, text=texts),
    ev(Kind.FINISH_CLAIMED, summary=texts),
    ev_with(Kind.STEP_COMPLETED, manifest_delta),
    ev(Kind.STATUS_CHANGED, status=st.sampled_from(STATUSES), reason=texts),
)
created = ev(
    Kind.AGENT_CREATED,
    tenant=st.just("t1"),
    name=texts,
    goals=st.lists(st.fixed_dictionaries({"id": ids, "description": texts}), max_size=3),
    manifest=st.dictionaries(ids.map(lambda s: f"{s}.txt"), hex64, max_size=3),
)


@st.composite
def journals(draw: st.DrawFn) -> list[Event]:
    """AGENT_CREATED, then batches of any events, sealed as a store would seal them."""
    events = seal("ag_1", 1, GENESIS_HASH, T0, 0, [draw(created)])
    for i, batch in enumerate(draw(st.lists(st.lists(any_event, min_size=1, max_size=4)))):
        events += seal("ag_1", len(events) + 1, events[-1].hash, T0 + i + 1, 1, batch)
    return events


def canonical_round_trip(state: State) -> State:
    return State.from_json(loads(dumps(state.to_json())))


# -- properties --------------------------------------------------------------------------


@FAST
@given(journals())
def test_fold_is_deterministic(events: list[Event]) -> None:
    first, second = fold(events), fold(list(events))
    assert first == second
    assert dumps(first.to_json()) == dumps(second.to_json())
    assert first.version == events[-1].seq == len(events)
    assert first.head_hash == events[-1].hash


@FAST
@given(journals())
def test_state_round_trips_through_canonical_json(events: list[Event]) -> None:
    state = fold(events)
    back = canonical_round_trip(state)
    assert back == state
    assert dumps(back.to_json()) == dumps(state.to_json())


@FAST
@given(journals())
def test_fold_of_events_read_back_from_json_is_the_same(events: list[Event]) -> None:
    # a store hands back events parsed from their stored JSON
    read_back = [Event.from_json(loads(dumps(e.to_json()))) for e in events]
    assert fold(read_back) == fold(events)


@FAST
@given(journals(), st.data())
def test_folding_in_two_parts_equals_folding_at_once(
    events: list[Event], data: st.DataObject
) -> None:
    # what Store.commit relies on: new state = old state + the new events
    k = data.draw(st.integers(0, len(events)))
    assert fold(events[k:], fold(events[:k])) == fold(events)
    # and what resuming relies on: the saved state, reloaded, folds on the same way
    assert fold(events[k:], canonical_round_trip(fold(events[:k]))) == fold(events)


@FAST
@given(journals())
def test_apply_does_not_change_the_state_it_is_given(events: list[Event]) -> None:
    state = State()
    for e in events:
        before = copy.deepcopy(state)
        after = apply(state, e)
        assert state == before
        state = after


# -- examples ------------------------------------------------------------------------------


def folded(*batch: NewEvent) -> State:
    return fold(seal("ag_1", 1, GENESIS_HASH, T0, 0, batch))


def make_created(**extra: Any) -> NewEvent:
    return NewEvent(Kind.AGENT_CREATED, {"tenant": "acme", "name": "n", **extra})


def test_fold_of_nothing_is_the_empty_state() -> None:
    assert fold([]) == State()
    assert State().head_hash == GENESIS_HASH
    assert State().version == 0


def test_state_from_json_ignores_unknown_fields() -> None:
    obj = {**folded(make_created()).to_json(), "added_by_a_newer_stead": 1}
    assert State.from_json(obj) == folded(make_created())


def test_goals_are_pushed_and_completed() -> None:
    s = folded(
        make_created(goals=[{"id": "a", "description": "first"}]),
        NewEvent(Kind.GOAL_PUSHED, {"id": "b", "description": "second"}),
        NewEvent(Kind.GOAL_COMPLETED, {"id": "a"}),
    )
    assert s.goals == [
        {"id": "a", "description": "first", "status": "completed"},
        {"id": "b", "description": "second", "status": "open"},
    ]
    assert [g["id"] for g in s.open_goals()] == ["b"]


def test_outcome_unknown_stops_the_agent_until_resolved() -> None:
    intent = {
        "call_id": "c1",
        "tool": "pay",
        "args": {"amount": 5},
        "effect": "effectful",
        "idempotency_key": "k",
        "action": 0,
    }
    s = folded(
        make_created(),
        NewEvent(Kind.ACTIVATION_STARTED, {}),
        NewEvent(Kind.TOOL_INTENT, intent),
        NewEvent(Kind.OUTCOME_UNKNOWN, {"call_id": "c1", "reason": "worker died"}),
    )
    assert (s.status, s.status_reason) == ("needs_attention", "worker died")
    assert s.pending == {}
    assert s.unknown["c1"]["tool"] == "pay"
    resolved = fold(
        seal(
            "ag_1",
            s.version + 1,
            s.head_hash,
            T0,
            0,
            [NewEvent(Kind.CALL_RESOLVED, {"call_id": "c1", "resolution": "done", "by": "ann"})],
        ),
        s,
    )
    assert (resolved.status, resolved.unknown) == ("running", {})
    assert resolved.recent_calls[-1]["ok"] is True
    assert resolved.calls_total == 1


def test_recent_calls_are_bounded_but_counted() -> None:
    results = [
        NewEvent(
            Kind.TOOL_RESULT,
            {"call_id": f"c{i}", "tool": "t", "args": {}, "ok": True, "output": i},
        )
        for i in range(RECENT_CALLS + 5)
    ]
    s = folded(make_created(), *results)
    assert len(s.recent_calls) == RECENT_CALLS
    assert s.recent_calls[-1]["output"] == RECENT_CALLS + 4
    assert s.calls_total == RECENT_CALLS + 5


def test_manifest_follows_changes_and_removals() -> None:
    s = folded(
        make_created(manifest={"a": "1", "b": "2"}),
        NewEvent(Kind.STEP_COMPLETED, {"changed": {"b": "22", "c": "3"}, "removed": ["a"]}),
    )
    assert s.manifest == {"b": "22", "c": "3"}
    assert s.steps_completed == 1
