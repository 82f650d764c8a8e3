"""A canary: a spec's new version on a few agents, watched, then the rest or back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.store.anchors import spec_digest
from stead.store.memory import MemoryStore
from stead.testing import scripted
from stead.upgrades.canary import canary

WAIT = [{"wait_for_input": "more?"}]


def spec(**extra: Any) -> dict[str, Any]:
    return {"name": "helper", "model": "scripted:script.yaml", "instructions": "Help.",
            "tools": ["read_file"], **extra}  # fmt: skip


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(WAIT * 4), encoding="utf-8")
    return Runtime(MemoryStore(), tmp_path / "data", clock=FakeClock())


def fleet(rt: Runtime, tmp_path: Path, n: int = 3) -> list[str]:
    ids = [rt.create(parse_spec(spec(), tmp_path)).agent_id for _ in range(n)]
    for agent_id in ids:
        rt.run(agent_id, model=scripted(WAIT * 4))
    return sorted(ids)


def instructions(rt: Runtime, ids: list[str]) -> list[str]:
    return [rt.store.get_record(a).spec["instructions"] for a in ids]


def test_a_quiet_canary_is_followed_by_the_rest(rt: Runtime, tmp_path: Path) -> None:
    ids = fleet(rt, tmp_path)
    clock = rt.clock
    assert isinstance(clock, FakeClock)
    seen: list[list[str]] = []

    def sleep(seconds: float) -> None:  # the watch, as time passing
        seen.append(instructions(rt, ids))
        clock.advance(seconds)

    new = parse_spec(spec(instructions="Help, v2."), tmp_path)
    report = canary(rt, "helper", new, count=1, watch=30, sleep=sleep)
    assert report.outcome == "applied" and report.canaries == ids[:1] and report.rest == ids[1:]
    # while watched, only the canary had the new spec
    assert seen and all(s == ["Help, v2.", "Help.", "Help."] for s in seen)
    assert len(seen) >= 30  # polled once a second for the whole watch
    assert instructions(rt, ids) == ["Help, v2."] * 3


def test_a_violation_during_the_watch_rolls_the_canaries_back(rt: Runtime, tmp_path: Path) -> None:
    ids = fleet(rt, tmp_path, 4)
    born = spec_digest(rt.store.get_record(ids[0]).spec)
    clock = rt.clock
    assert isinstance(clock, FakeClock)

    def sleep(seconds: float) -> None:
        clock.advance(seconds)
        if not any(e.kind == Kind.VIOLATION for e in rt.store.read_events(ids[1])):
            # a monitor of the second canary flags what it does on the new spec
            with rt.hold(ids[1]) as act:
                act.emit(Kind.VIOLATION, violation_id="v-1", rule="loop", verdict="suspend",
                         message="the same call 5 times", events=[])  # fmt: skip
                act.flush()

    new = parse_spec(spec(instructions="Help, v2."), tmp_path)
    report = canary(rt, "helper", new, count=2, watch=600, sleep=sleep, reason="try v2")
    assert report.outcome == "rolled_back" and "monitor loop" in report.why
    assert instructions(rt, ids) == ["Help."] * 4  # the rest never had it
    for agent_id in ids[:2]:
        ups = [e.data for e in rt.store.read_events(agent_id) if e.kind == Kind.SPEC_UPGRADED]
        assert [u["rollback"] for u in ups] == [False, True]
        assert ups[1]["to"] == born and "canary rolled back" in ups[1]["reason"]
        assert rt.store.load_state(agent_id).spec_digest == born


def test_a_canary_run_again_skips_what_it_already_upgraded(rt: Runtime, tmp_path: Path) -> None:
    ids = fleet(rt, tmp_path)
    clock = rt.clock
    assert isinstance(clock, FakeClock)
    new = parse_spec(spec(instructions="Help, v2."), tmp_path)
    # a first run killed during its watch: the canary has the new spec, the rest not
    rt.upgrade(ids[0], new, reason="canary of 1")
    clock.advance(5)
    report = canary(rt, "helper", new, count=1, watch=30, sleep=clock.advance)
    assert report.skipped == ids[:1] and report.rest == ids[1:]
    # the watch ended 30 seconds after the canary's upgrade, not after the second start
    upgraded = [e for e in rt.store.read_events(ids[1]) if e.kind == Kind.SPEC_UPGRADED]
    first = [e for e in rt.store.read_events(ids[0]) if e.kind == Kind.SPEC_UPGRADED]
    assert upgraded[0].at - first[0].at == pytest.approx(30, abs=1.01)
    assert len(first) == 1  # not upgraded twice
