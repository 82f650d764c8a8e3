"""Upgrading a live agent's spec: journaled, sealed, checked, and read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, GovernanceError, Kind, LeaseHeld, Runtime, parse_spec
from stead.integrity.audit import audit
from stead.store.anchors import spec_digest
from stead.store.sqlite import SqliteStore
from stead.testing import scripted
from stead.upgrades.apply import digest_at, history, previous_spec, spec_events

WAIT = [{"wait_for_input": "more?"}]


def spec(**extra: Any) -> dict[str, Any]:
    return {"name": "helper", "model": "scripted:script.yaml", "instructions": "Help.",
            "tools": ["read_file"], **extra}  # fmt: skip


def runtime(tmp_path: Path) -> Runtime:
    return Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock())


def made(rt: Runtime, tmp_path: Path, **extra: Any) -> str:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(WAIT * 4), encoding="utf-8")
    agent_id = rt.create(parse_spec(spec(**extra), tmp_path)).agent_id
    rt.run(agent_id, model=scripted(WAIT * 4))
    return agent_id


def test_an_upgrade_is_one_event_and_the_spec_column_it_names(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    before = rt.store.get_record(agent_id).spec
    new = parse_spec(spec(instructions="Help, briefly.", tools=["read_file", "list_files"]),
                     tmp_path)  # fmt: skip
    found = rt.upgrade(agent_id, new, reason="shorter answers")
    assert [c.field for c in found.changes] == ["instructions", "tools"]
    assert found.added_tools == ("list_files",) and found.widening == ("adds the tool list_files",)
    record = rt.store.get_record(agent_id)
    assert record.spec == new.to_record() and record.spec != before
    (ev,) = [e for e in rt.store.read_events(agent_id) if e.kind == Kind.SPEC_UPGRADED]
    assert ev.data["from"] == spec_digest(before) and ev.data["to"] == spec_digest(record.spec)
    assert ev.data["reason"] == "shorter answers" and ev.data["previous"] == before
    state = rt.store.load_state(agent_id)
    assert state.spec_digest == ev.data["to"]
    # the added tool got the grant a creation would give it, in the same commit
    assert {g["tool"] for g in state.grants.values()} == {"read_file", "list_files"}
    # the agent runs on (the sealed spec is the new one), and the audit agrees
    rt.send(agent_id, "go on")
    assert rt.run(agent_id, model=scripted(WAIT * 4)).state.status == "waiting"
    assert rt.store.get_anchor(agent_id).spec_hash == ev.data["to"]  # type: ignore[union-attr]
    assert audit(rt.store, agent_id, workspace=rt.workspace(agent_id, "default")).ok


def test_a_spec_column_edited_without_an_event_is_still_refused(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    rt.upgrade(agent_id, parse_spec(spec(instructions="v2"), tmp_path))
    store = rt.store
    assert isinstance(store, SqliteStore)
    other = {**store.get_record(agent_id).spec, "instructions": "v3, by hand"}
    from stead.canonical import dumps
    from stead.store import codec

    store._db.execute("UPDATE agents SET spec = ? WHERE agent_id = ?",
                      (codec.pack(dumps(other)), agent_id))  # fmt: skip
    with pytest.raises(Exception, match="its last spec upgrade"):
        rt.send(agent_id, "hello")


def test_a_pending_intent_on_a_removed_tool_refuses_the_upgrade(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path, tools=["read_file", "list_files"])
    # a call whose outcome is unknown, as a crash mid-call leaves it
    with rt.hold(agent_id) as act:
        act.emit(Kind.TOOL_INTENT, call_id="c-1", tool="list_files", args={}, effect="read",
                 idempotency_key="k", action=0)  # fmt: skip
        act.emit(Kind.OUTCOME_UNKNOWN, call_id="c-1", reason="the worker died")
        act.flush()
    narrower = parse_spec(spec(tools=["read_file"]), tmp_path)
    shown = rt.upgrade(agent_id, narrower, dry_run=True)  # the plan says why, refusing nothing
    assert shown.blocking == ("c-1 (list_files): an unknown outcome",)
    refused = r"c-1 \(list_files\): an unknown outcome.*stead resolve"
    with pytest.raises(GovernanceError, match=refused):
        rt.upgrade(agent_id, narrower)
    assert rt.store.get_record(agent_id).spec["tools"] == ["read_file", "list_files"]
    rt.resolve(agent_id, "c-1", "abort")
    found = rt.upgrade(agent_id, narrower)
    assert found.removed_tools == ("list_files",)
    assert [g.split(" ")[1] for g in found.orphan_grants] == ["(list_files)"]


def test_widening_needs_an_admin_and_a_viewer_may_not_upgrade(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    wider = parse_spec(spec(tools=["read_file", "write_file"]), tmp_path)
    with pytest.raises(GovernanceError, match=r"widens.*adds the tool write_file.*admin"):
        rt.upgrade(agent_id, wider, role="operator")
    with pytest.raises(GovernanceError, match="needs the operator role"):
        rt.upgrade(agent_id, parse_spec(spec(instructions="x"), tmp_path), role="viewer")
    limits = parse_spec({**spec(), "limits": {"max_steps": 5000}}, tmp_path)
    with pytest.raises(GovernanceError, match="raises the limit max_steps"):
        rt.upgrade(agent_id, limits, role="operator")
    handed = parse_spec(spec(tools=[{"tool": "read_file", "secrets": ["DB_PASSWORD"]}]),
                        tmp_path)  # fmt: skip
    with pytest.raises(GovernanceError, match="gives the tool read_file the secrets DB_PASSWORD"):
        rt.upgrade(agent_id, handed, role="operator")
    # a narrowing one an operator may apply
    rt.upgrade(agent_id, parse_spec(spec(instructions="x"), tmp_path), role="operator")
    assert rt.store.get_record(agent_id).spec["instructions"] == "x"


def test_a_dry_run_changes_nothing(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    version = rt.store.load_state(agent_id).version
    found = rt.upgrade(agent_id, parse_spec(spec(instructions="x"), tmp_path), dry_run=True)
    assert found.to_json()["changes"] == [{"field": "instructions", "before": "Help.",
                                            "after": "x"}]  # fmt: skip
    assert rt.store.load_state(agent_id).version == version


def test_a_running_agent_is_not_upgraded_mid_step(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    rt.store.acquire_lease(agent_id, "elsewhere:1", 60, rt.clock.now())
    with pytest.raises(LeaseHeld, match=r"never inside a step.*--wait"):
        rt.upgrade(agent_id, parse_spec(spec(instructions="x"), tmp_path))
    assert rt.store.get_record(agent_id).spec["instructions"] == "Help."


def test_each_event_can_say_which_spec_decided_it(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    born = spec_digest(rt.store.get_record(agent_id).spec)
    rt.upgrade(agent_id, parse_spec(spec(instructions="v2"), tmp_path))
    v2 = spec_digest(rt.store.get_record(agent_id).spec)
    rt.send(agent_id, "again")
    rt.run(agent_id, model=scripted(WAIT * 4))
    events = list(rt.store.read_events(agent_id))
    decisions = [e.seq for e in events if e.kind == Kind.DECISION]
    upgraded = next(e.seq for e in events if e.kind == Kind.SPEC_UPGRADED)
    spec_log = spec_events(rt.store, agent_id)
    assert [digest_at(spec_log, s) for s in decisions] == [born, v2]
    assert digest_at(spec_log, upgraded) == born  # the upgrade itself came under the old one
    rows = history(rt.store, agent_id)
    assert [(r["kind"], r["digest"]) for r in rows] == [("agent_created", born), ("upgrade", v2)]
    assert previous_spec(rt.store, agent_id)["instructions"] == "Help."


def test_a_hibernated_agent_takes_the_upgrade_and_runs_on_it(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    rt.hibernate(agent_id)
    rt.upgrade(agent_id, parse_spec(spec(instructions="after sleep"), tmp_path))
    assert rt.store.load_state(agent_id).status == "hibernated"
    rt.send(agent_id, "wake up")
    assert rt.run(agent_id, model=scripted(WAIT * 4)).state.status == "waiting"
    assert rt.store.get_record(agent_id).spec["instructions"] == "after sleep"


def test_a_model_swap_gives_way_only_to_an_upgrade_that_changes_the_model(
    tmp_path: Path,
) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(WAIT * 4), encoding="utf-8")
    rt.set_model(agent_id, "scripted:other.yaml", base_dir=tmp_path)
    rt.upgrade(agent_id, parse_spec(spec(instructions="v2"), tmp_path))
    swapped = rt.store.load_state(agent_id).model_override
    assert swapped is not None and swapped["model"] == "scripted:other.yaml"
    found = rt.upgrade(agent_id, parse_spec(spec(model="scripted:other.yaml"), tmp_path))
    assert found.model_changed
    assert rt.store.load_state(agent_id).model_override is None  # the spec's model decides


def test_with_wait_an_upgrade_lands_once_the_running_step_ends(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    lease = rt.store.acquire_lease(agent_id, "elsewhere:1", 60, rt.clock.now())
    pauses: list[float] = []

    def sleep(seconds: float) -> None:  # the worker's step ends while the upgrade waits
        pauses.append(seconds)
        if len(pauses) == 3:
            rt.store.release_lease(lease)

    rt.upgrade(agent_id, parse_spec(spec(instructions="x"), tmp_path), wait=60, sleep=sleep)
    assert len(pauses) == 3
    assert rt.store.get_record(agent_id).spec["instructions"] == "x"


def test_a_rollback_of_work_keeps_the_spec_in_force(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    agent_id = made(rt, tmp_path)
    before = rt.store.load_state(agent_id).version
    rt.upgrade(agent_id, parse_spec(spec(instructions="v2"), tmp_path))
    upgraded = rt.store.load_state(agent_id).spec_digest
    rt.rollback(agent_id, to_version=before)
    assert rt.store.load_state(agent_id).spec_digest == upgraded
    assert rt.store.get_record(agent_id).spec["instructions"] == "v2"
    rt.send(agent_id, "go on")  # and it runs: the seal holds
    assert rt.run(agent_id, model=scripted(WAIT * 4)).state.status == "waiting"
