"""Boundary: the files a command leaves in the workspace (issue 25, items 5 to 7).

A command is the model's to choose, so whatever it names a file is hostile:
``..\\x`` (a name restore reads as a climb out of the workspace), bytes that
are not UTF-8, a name as long as the kernel allows, folders nested past any
path a restore can write, tens of thousands of empty files. What must never
happen: a name the scan accepts and a restore later refuses (the agent could
never hibernate, wake, fork or be imported again), a worker crashed by a
name, a file lost without a journaled word, or a scan that takes as long as a
command cares to make it. What must hold: the call that left such files fails,
its changes are undone, its result says why, and the agent runs on.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.errors import SpecError
from stead.integrity.audit import audit
from stead.sandbox.bwrap import BwrapSandbox
from stead.spec import parse_spec

from ..governance.agents import make_agent, runtime_at

NOT_UTF8 = "touch \"$(printf 'bad\\377name')\""


def _script(command: str) -> list[dict[str, Any]]:
    return [
        {"tool": "shell", "args": {"command": command}},
        {"tool": "shell", "args": {"command": "echo still here > after.txt"}},
        {"wait_for_input": "more?"},
        {"tool": "shell", "args": {"command": "cat after.txt; ls -A"}},
        {"finish": "done"},
    ]


def _agent_after(tmp_path: Path, command: str, **limits: Any) -> tuple[Runtime, str]:
    """An agent whose first call runs ``command``, run until it waits for input."""
    rt = runtime_at(tmp_path, FakeClock())
    spec: dict[str, Any] = {"tools": ["shell"]}
    if limits:
        spec["limits"] = limits
    agent = make_agent(rt, tmp_path, _script(command), **spec)
    rt.run(agent)  # must not raise, whatever the command named
    return rt, agent


def _results(rt: Runtime, agent: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent) if e.kind == Kind.TOOL_RESULT]


def _on_disk(root: Path) -> list[bytes]:
    """Every entry under ``root``, as the bytes the kernel holds."""
    found: list[bytes] = []
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in [*dirnames, *filenames]:
            found.append(os.path.relpath(os.path.join(dirpath, name), os.fsencode(root)))
    return sorted(found)


def _refused_then_runs_on(rt: Runtime, agent: str, tmp_path: Path, *words: str) -> None:
    """The call failed saying why (``words``), its files are gone, and the agent is
    whole: audited, forked, exported and imported, hibernated, woken and finished."""
    bad, after = _results(rt, agent)
    assert bad["ok"] is False, bad
    for word in words:
        assert word in bad["error"], bad["error"]
    assert "undone" in bad["error"], bad["error"]
    assert not bad.get("changed") and not bad.get("removed"), bad
    assert after["ok"] is True, after
    state = rt.store.load_state(agent)
    assert state.status == "waiting" and list(state.manifest) == ["after.txt"]
    root = rt.workspace(agent, "default").root
    assert _on_disk(root) == [b"after.txt"]

    report = audit(rt.store, agent, vault=rt.vault(), workspace=rt.workspace(agent, "default"))
    assert report.ok, report.reason

    fork = rt.fork(agent)
    assert list(fork.manifest) == ["after.txt"]
    archive = tmp_path / "agent.stead"
    rt.export(agent, archive)
    other = runtime_at(tmp_path / "elsewhere", FakeClock())
    imported = other.import_archive(archive)
    assert list(imported.manifest) == ["after.txt"]

    snap = rt.hibernate(agent)
    assert snap.manifest == state.manifest
    rt.wake(agent)
    rt.send(agent, "go on")
    assert rt.run(agent).state.status == "completed"
    last = _results(rt, agent)[-1]
    assert last["ok"] is True and last["output"]["stdout"] == "still here\nafter.txt\n", last


# -- item 5: a name restore would refuse is refused when the scan meets it -------------


def test_a_backslash_climb_fails_its_call_and_the_agent_runs_on(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    rt, agent = _agent_after(tmp_path, "printf x > '..\\x'; mkdir -p a; printf y > 'a/..\\..\\y'")
    _refused_then_runs_on(rt, agent, tmp_path, "'..\\\\", "'..' component")


def test_folders_nested_past_what_a_restore_can_write_fail_their_call(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    """25 folders of 200 bytes: a path the sandbox writes, but past the host's PATH_MAX
    once the workspace's own folder is in front of it (a restore hit ENAMETOOLONG)."""
    deep = (
        'n=$(printf "d%.0s" $(seq 200)); i=0; '
        "while [ $i -lt 25 ]; do mkdir $n && cd $n; i=$((i+1)); done; echo deep > f"
    )
    rt, agent = _agent_after(tmp_path, deep)
    _refused_then_runs_on(rt, agent, tmp_path, "longer than 1024 bytes")


def test_folders_nested_deeper_than_a_path_may_go_fail_their_call(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    deep = "i=0; while [ $i -lt 300 ]; do mkdir d && cd d; i=$((i+1)); done; echo deep > f"
    rt, agent = _agent_after(tmp_path, deep)
    _refused_then_runs_on(rt, agent, tmp_path, "more than 64 levels deep")


def test_a_name_as_long_as_the_kernel_allows_survives_hibernation(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    """A 250-byte name is a plain name: kept, and put back by a wake and a fork (a
    restore used to write it through a longer temporary name the kernel refused)."""
    name = "x" * 250
    rt, agent = _agent_after(tmp_path, f"echo long > {name}")
    first = _results(rt, agent)[0]
    assert first["ok"] is True and name in first["changed"], first
    assert sorted(rt.fork(agent).manifest) == ["after.txt", name]
    rt.hibernate(agent)
    rt.wake(agent)
    assert (rt.workspace(agent, "default").root / name).read_text() == "long\n"


# -- item 6: a name that is not UTF-8 -----------------------------------------------------


def test_a_name_that_is_not_utf8_fails_its_call_and_crashes_nothing(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    rt, agent = _agent_after(tmp_path, f"echo made > made.txt; {NOT_UTF8}")
    _refused_then_runs_on(rt, agent, tmp_path, "bad\\\\xffname", "not UTF-8")


def test_a_name_that_is_not_utf8_found_outside_a_call_is_removed_with_a_journaled_word(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    """A file no call made (a person, a stale worker) is put out of the workspace by
    the next restore, and the ``workspace_restored`` event names it: the name as
    text, its bytes that are not UTF-8 written as escapes."""
    rt, agent = _agent_after(tmp_path, "echo ok > ok.txt")
    root = rt.workspace(agent, "default").root
    (Path(os.fsdecode(os.fsencode(root) + b"/planted\xff\xfe"))).write_bytes(b"x")
    snap = rt.hibernate(agent)
    assert sorted(snap.manifest) == ["after.txt", "ok.txt"]
    restored = [
        dict(e.data) for e in rt.store.read_events(agent) if e.kind == Kind.WORKSPACE_RESTORED
    ]
    assert restored and restored[-1]["paths"] == ["planted\\xff\\xfe"], restored
    rt.wake(agent)
    assert _on_disk(rt.workspace(agent, "default").root) == [b"after.txt", b"ok.txt"]


# -- item 7: how many files, and how long the scan may take -----------------------------


def test_files_past_limits_workspace_files_fail_their_call(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    many = "i=0; while [ $i -lt 3000 ]; do : > f$i; i=$((i+1)); done"
    rt, agent = _agent_after(tmp_path, many, workspace_mb=5, workspace_files=1000)
    _refused_then_runs_on(rt, agent, tmp_path, "more than 1000 files", "limits.workspace_files")


def test_sixty_thousand_empty_files_under_the_default_limit_are_refused_quickly(
    bwrap: BwrapSandbox, tmp_path: Path
) -> None:
    """The issue's 60,000 empty files under a 5 MiB quota: refused by the default
    count, the scan stopping at the limit rather than hashing every file."""
    many = (
        "mkdir m && cd m && i=0; while [ $i -lt 60 ]; do "
        "j=0; while [ $j -lt 1000 ]; do : > f$i-$j; j=$((j+1)); done; i=$((i+1)); done"
    )
    began = time.monotonic()
    rt, agent = _agent_after(tmp_path, many, workspace_mb=5)
    took = time.monotonic() - began
    _refused_then_runs_on(rt, agent, tmp_path, "more than 10000 files")
    assert took < 60, took  # it took 57 s when every file was scanned


def test_limits_workspace_files_is_checked_and_recorded(tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text("- {finish: done}\n", encoding="utf-8")
    base = {"name": "n", "model": "scripted:script.yaml"}
    assert parse_spec(base, tmp_path).to_record()["limits"]["workspace_files"] == 10_000
    spec = parse_spec({**base, "limits": {"workspace_files": 50}}, tmp_path)
    assert spec.to_record()["limits"]["workspace_files"] == 50
    for bad in (0, -1, 1.5, True, "many", 10_000_001):
        with pytest.raises(SpecError, match=r"limits\.workspace_files"):
            parse_spec({**base, "limits": {"workspace_files": bad}}, tmp_path)
