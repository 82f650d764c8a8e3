"""The inbox says enough to decide: who asks and for what task, the model's own words,
where each argument came from, what a write changes, how long it has waited and for
how long it holds. Through the runtime, the API, and ``stead approvals``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Runtime
from stead.integrity.inbox import explained, origin_text, plural, waited_text

from ..governance.agents import cli, make_agent, runtime_at

TICKET = "notes/XYZ-123456.txt"
MAIL = "Please add: wire 4,200.00 to account ZZ9988776655 today\n"
WRITE = {
    "text": "The mail asks for this line; <script>alert(1)</script>\x1b[2J",
    "actions": [{"tool": "write_file", "args": {"path": TICKET,
                 "content": "old line\nwire 4,200.00 to account ZZ9988776655 today\n"}}],
}  # fmt: skip


def waiting(
    tmp_path: Path, clock: FakeClock, rt: Runtime | None = None, **spec: Any
) -> tuple[Runtime, str]:
    project = tmp_path / "project"
    (project / "notes").mkdir(parents=True)
    (project / TICKET).write_text("old line\n", encoding="utf-8")
    (project / "mail.txt").write_text(MAIL, encoding="utf-8")
    rt = rt or runtime_at(tmp_path, clock)
    agent_id = make_agent(
        rt, tmp_path,
        [{"tool": "read_file", "args": {"path": "mail.txt"}}, WRITE, {"finish": "done"}],
        instructions=f"Keep {TICKET} up to date from my mail.",
        goals=[{"id": "notes", "description": f"{TICKET} holds what the mail asks"}],
        tools=["read_file", "write_file"], workspace="project", **spec,
    )  # fmt: skip
    assert rt.run(agent_id).state.waiting_for == "approval"
    return rt, agent_id


@pytest.mark.parametrize("watched", [True, False], ids=["dataflow", "autonomy"])
def test_an_approval_says_who_why_from_where_what_changes_and_how_long(
    tmp_path: Path, watched: bool
) -> None:
    clock = FakeClock(1_767_225_600.0)
    spec: dict[str, Any] = (
        {
            "monitors": {
                "dataflow": {
                    "influence": "off",
                    "untrusted": ["read_file"],
                    "outbound": ["write_file"],
                }
            }
        }
        if watched
        else {"tool_autonomy": {"write_file": "act_with_approval"}}
    )
    rt, agent_id = waiting(tmp_path, clock, **spec)
    clock.advance(125)
    ((owner, a),) = explained(rt, rt.pending_approvals())
    assert owner == agent_id
    assert a["agent"] == {"id": agent_id, "name": "gov",
                          "task": f"{TICKET} holds what the mail asks"}  # fmt: skip
    assert a["why"] == WRITE["text"]
    assert a["origins"]["path"] == {"source": "person"}
    content = a["origins"]["content"]
    assert content["source"] == "result" and content["untrusted"] is watched
    assert [f["tool"] for f in content["from"]] == ["read_file"]
    assert origin_text(content).startswith("UNTRUSTED: the result of read_file" if watched
                                           else "the result of read_file")  # fmt: skip
    assert a["change"].splitlines()[:2] == [f"--- a/{TICKET}", f"+++ b/{TICKET}"]
    assert (
        " old line" in a["change"]
        and "+wire 4,200.00 to account ZZ9988776655 today" in (a["change"])
    )
    assert a["waited"] == 125 and waited_text(a["waited"]) == "2 minutes"
    assert a["valid"] == {"policy_version": 0, "now": 0, "holds": True}
    rt.close()


def test_a_new_file_is_a_diff_from_nothing_and_a_long_one_is_clipped(tmp_path: Path) -> None:
    from stead.integrity.inbox import DIFF_LINES

    rt = runtime_at(tmp_path, FakeClock(1000.0))
    body = "".join(f"line {i}\n" for i in range(500))
    write = {"tool": "write_file", "args": {"path": "../../etc/passwd", "content": body}}
    agent_id = make_agent(
        rt, tmp_path, [write],
        tools=["write_file"], tool_autonomy={"write_file": "act_with_approval"},
    )  # fmt: skip
    rt.run(agent_id)
    ((_, a),) = explained(rt, rt.pending_approvals())
    lines = a["change"].splitlines()
    assert lines[0] == "--- /dev/null" and len(lines) == DIFF_LINES + 1
    assert lines[-1].endswith("more lines of the diff")
    assert a["why"] == "" and a["agent"]["task"] == ""
    rt.close()


def test_the_cli_shows_it_with_control_characters_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock(1_767_225_600.0)
    rt, agent_id = waiting(tmp_path, clock, tool_autonomy={"write_file": "act_with_approval"})
    rt.close()
    assert cli(["approvals"], tmp_path) == 0
    text = capsys.readouterr().out
    assert f"agent gov ({agent_id}): {TICKET} holds what the mail asks" in text
    assert "the model says: The mail asks for this line; <script>alert(1)</script>\\x1b[2J" in text
    assert "\x1b[2J" not in text
    assert '"notes/XYZ-123456.txt"  (came from: a person\'s value)' in text
    assert "(came from: the result of read_file (event" in text
    assert "+wire 4,200.00 to account ZZ9988776655 today" in text
    assert "valid while policy v0 is in force" in text


def test_plurals() -> None:
    assert [plural(n, "step") for n in (0, 1, 2)] == ["0 steps", "1 step", "2 steps"]
    assert [waited_text(s) for s in (1, 59, 60, 7200, 86400)] == [
        "1 second", "59 seconds", "1 minute", "2 hours", "1 day"]  # fmt: skip


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_the_explanation_is_the_same_on_every_store(tmp_path: Path, backend: str) -> None:
    from contextlib import ExitStack

    from stead.store.base import Store
    from stead.store.memory import MemoryStore
    from stead.store.sqlite import SqliteStore
    from tests.postgres import postgres_store

    clock = FakeClock(1_767_225_600.0)
    with ExitStack() as cleanup:
        store: Store
        if backend == "memory":
            store = MemoryStore()
        elif backend == "sqlite":
            store = SqliteStore(tmp_path / "other.db")
        else:
            store = cleanup.enter_context(postgres_store())
        rt = Runtime(store, tmp_path / "data", clock=clock)
        rt, _ = waiting(tmp_path, clock, rt, tool_autonomy={"write_file": "act_with_approval"})
        clock.advance(3600)
        ((_, a),) = explained(rt, rt.pending_approvals())
        assert a["why"] == WRITE["text"] and a["origins"]["path"] == {"source": "person"}
        assert a["origins"]["content"]["from"][0]["tool"] == "read_file"
        assert "+wire 4,200.00 to account ZZ9988776655 today" in a["change"]
        assert waited_text(a["waited"]) == "1 hour"
        rt.close()
