"""Verified completion: claims are checked at that moment, and completions are certified."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.integrity.certificates import journaled_certificate, verify_certificate
from stead.integrity.completion import Verifier
from stead.runtime.activation import Activation
from stead.sandbox.bwrap import BwrapSandbox
from stead.tools.base import as_tool, tool
from stead.tools.builtin import BUILTINS

from ..governance.agents import make_agent, runtime_at

WRITE = {name: as_tool(BUILTINS[name]) for name in ("write_file", "read_file", "shell")}


def write(path: str, content: str = "x\n") -> dict[str, Any]:
    return {"tool": "write_file", "args": {"path": path, "content": content}}


def contexts_seen(rt: Runtime, agent: str) -> tuple[Any, list[str]]:
    from stead.models.registry import model_for

    inner = model_for(rt.store.get_record(agent).spec)
    seen: list[str] = []

    class Watching:
        name = "watching"

        def decide(self, context: Any) -> Any:
            seen.append(context.text)
            return inner.decide(context)

    return Watching(), seen


GOAL_AB = {"id": "ab", "accept": [{"files_exist": ["a.txt", "b.txt"]}]}


def test_finish_with_goals_unmet_is_rejected_and_the_model_is_told(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [
            write("a.txt"),
            {"finish": "all done"},
            write("b.txt"),
            {"complete_goal": "ab"},
            {"finish": "really done"},
        ],
        goals=[GOAL_AB],
        tools=["write_file"],
    )
    model, seen = contexts_seen(rt, agent)
    state = rt.run(agent, tools=WRITE, model=model).state
    events = list(rt.store.read_events(agent))
    (rejected,) = [e for e in events if e.kind == Kind.FINISH_REJECTED]
    assert rejected.data["reasons"] == ["goal ab is not completed"]
    assert "finish was not accepted: goal ab is not completed" in seen[2]
    assert state.status == "completed" and state.status_reason == "really done"
    (done,) = [e for e in events if e.kind == Kind.GOAL_COMPLETED]
    assert done.data["evidence"][0]["ok"] and done.data["evidence"][0]["check"].startswith("files")
    rt.close()


def test_a_goal_whose_checks_fail_stays_open(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [write("a.txt"), {"complete_goal": "ab"}, {"complete_goal": "nope"}],
        goals=[GOAL_AB],
        tools=["write_file"],
    )
    state = rt.run(agent, tools=WRITE).state
    assert state.goals[0]["status"] == "open"
    rejected = [e for e in rt.store.read_events(agent) if e.kind == Kind.GOAL_REJECTED]
    assert "missing: b.txt" in rejected[0].data["reasons"][0]
    assert "there is no goal 'nope'" in rejected[1].data["reasons"][0]
    assert state.status == "needs_attention"  # the script ran out; it never finished
    rt.close()


def test_finish_rechecks_goals_so_undone_work_is_not_declared_done(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    goal = {"id": "v2", "accept": [{"file_contains": {"path": "a.txt", "text": "v2"}}]}
    agent = make_agent(
        rt,
        tmp_path,
        [
            write("a.txt", "v2\n"),
            {"complete_goal": "v2"},
            {"remember": {"v2": "done"}},
            write("a.txt", "v3\n"),
            {"finish": "done"},
        ],
        goals=[goal],
        tools=["write_file"],
    )
    state = rt.run(agent, tools=WRITE).state
    assert state.goals[0]["status"] == "completed"  # it was, when it was claimed
    assert state.memory == {"v2": "done"}  # and the agent remembers it so
    assert state.status != "completed"  # but finish found it no longer true
    (rejected,) = [e for e in rt.store.read_events(agent) if e.kind == Kind.FINISH_REJECTED]
    assert rejected.data["reasons"] == ["goal v2: a.txt contains 'v2' no longer passes: not found"]
    rt.close()


@tool(effect="effectful")
def publish(name: str, ctx: Any) -> str:
    """Writes a file, then (in this test) the worker dies before it is recorded."""
    (ctx.workspace / name).write_text("published\n")
    raise SystemExit("worker killed")


def test_finish_after_a_kill_with_the_work_not_done_is_not_completed(tmp_path: Path) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    agent = make_agent(
        rt,
        tmp_path,
        [
            write("a.txt"),
            {"tool": "publish", "args": {"name": "b.txt"}},
            {"actions": [{"complete_goal": "ab"}, {"finish": "published"}]},
        ],
        goals=[GOAL_AB],
        scope=[{"tool": "*"}],
    )
    tools = {**WRITE, "publish": as_tool(publish)}
    with pytest.raises(SystemExit):
        rt.run(agent, tools=tools)
    clock.advance(11)  # the dead worker's lease runs out
    rt.close()
    rt = runtime_at(tmp_path, clock)
    state = rt.run(agent, tools=tools).state  # recovery: publish's outcome is unknown
    assert state.status == "needs_attention"
    (call_id,) = state.unknown
    rt.resolve(agent, call_id, "done")  # a person says it happened; the file says otherwise
    model, seen = contexts_seen(rt, agent)
    state = rt.run(agent, tools=tools, model=model).state
    assert state.status != "completed"
    kinds = [e.kind for e in rt.store.read_events(agent)]
    assert Kind.GOAL_REJECTED in kinds and Kind.FINISH_REJECTED in kinds
    assert Kind.FINISH_CLAIMED not in kinds
    assert any("missing: b.txt" in text for text in seen)
    rt.close()


def test_a_pending_call_blocks_finish(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(rt, tmp_path, [{"finish": "x"}], tools=["write_file"])
    record = rt.store.get_record(agent)
    ws = rt.workspace(agent, "default")
    act = Activation(rt.store, record, ws, None, {}, rt.clock, vault=rt.vault)  # type: ignore[arg-type]
    act.acquire()
    try:
        act.state.pending = {"call_1": {"tool": "deploy", "action": 0}}
        act.state.unknown = {"call_2": {"tool": "mail", "action": 1}}
        Verifier(act).finish(0, "x")
        (event,) = act.buffer
        assert event.kind == Kind.FINISH_REJECTED
        assert event.data["reasons"] == [
            "call call_1 (deploy) is still pending",
            "call call_2 (mail) has an unknown outcome",
        ]
        act.buffer.clear()
    finally:
        act.release()
    rt.close()


def test_a_command_check_runs_in_the_sandbox(tmp_path: Path, bwrap: BwrapSandbox) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    rt.sandbox = bwrap
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"complete_goal": "tests"},
            write("ok.txt"),
            {"complete_goal": "tests"},
            {"finish": "green"},
        ],
        goals=[{"id": "tests", "accept": [{"command": "test -f ok.txt && echo fine"}]}],
        tools=["write_file"],
    )
    state = rt.run(agent, tools=WRITE).state
    assert state.status == "completed"
    events = list(rt.store.read_events(agent))
    (rejected,) = [e for e in events if e.kind == Kind.GOAL_REJECTED]
    assert "exit 1" in rejected.data["reasons"][0]
    (done,) = [e for e in events if e.kind == Kind.GOAL_COMPLETED]
    assert done.data["evidence"][0]["detail"] == "exit 0: fine"
    rt.close()


def _certified(tmp_path: Path) -> tuple[Runtime, str]:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [write("a.txt"), write("b.txt"), {"complete_goal": "ab"}, {"finish": "done"}],
        goals=[GOAL_AB],
        tools=["write_file"],
    )
    assert rt.run(agent, tools=WRITE).state.status == "completed"
    return rt, agent


def test_a_genuine_completion_yields_a_certificate_that_verifies(tmp_path: Path) -> None:
    rt, agent = _certified(tmp_path)
    certificate = journaled_certificate(rt.store, agent)
    assert certificate["goals"][0]["id"] == "ab"
    assert certificate["public_key"] == rt.store.load_state(agent).public_key
    assert verify_certificate(rt.store, certificate) == []
    rt.close()


@pytest.mark.parametrize("field", ["summary", "version", "head_hash", "goals"])
def test_a_certificate_edited_anywhere_does_not_verify(tmp_path: Path, field: str) -> None:
    rt, agent = _certified(tmp_path)
    certificate = journaled_certificate(rt.store, agent)
    edited = dict(certificate)
    if field == "goals":
        edited["goals"] = json.loads(
            json.dumps(certificate["goals"]).replace('"ok": true', '"ok": false', 1)
        )
    elif field == "version":
        edited["version"] = certificate["version"] - 1
    else:
        edited[field] = certificate[field][:-1] + ("0" if certificate[field][-1] != "0" else "1")
    problems = verify_certificate(rt.store, edited)
    assert any("signature" in p for p in problems), problems
    rt.close()


def test_a_certificate_file_edited_by_one_byte_is_refused_by_the_cli(tmp_path: Path) -> None:
    from stead.cli.main import main

    rt, agent = _certified(tmp_path)
    rt.close()
    store = f"sqlite:///{tmp_path / 's.db'}"
    common = ["--store", store, "--data-dir", str(tmp_path / "data")]
    good = tmp_path / "cert.json"
    good.write_text(
        json.dumps(journaled_certificate(runtime_at(tmp_path, FakeClock()).store, agent))
    )
    assert main(["verify-certificate", str(good), *common]) == 0
    text = good.read_text()
    i = text.index('"summary": "done"') + len('"summary": "')
    bad = tmp_path / "bad.json"
    bad.write_text(text[:i] + "D" + text[i + 1 :])
    assert main(["verify-certificate", str(bad), *common]) == 1
