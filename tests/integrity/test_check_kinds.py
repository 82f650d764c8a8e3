"""Acceptance checks of each kind: a predicate, files that exist or match, a person's sign-off.

For each: passing completes the goal with its evidence journaled (and carried into
the accepted finish and its certificate); failing leaves the goal open, journals
the reason and shows it to the model in its next context.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind, Runtime
from stead.canonical import sha256_hex
from stead.integrity.certificates import journaled_certificate, verify_certificate
from stead.journal import NewEvent
from stead.runtime.leases import person
from stead.tools.base import as_tool
from stead.tools.builtin import BUILTINS

from ..governance.agents import cli, make_agent, runtime_at
from .test_completion import contexts_seen, write

TOOLS = {name: as_tool(BUILTINS[name]) for name in ("write_file", "read_file")}
HERE = "tests.integrity.test_check_kinds"
SEEN_BY_PREDICATE: list[tuple[dict[str, Any], Path]] = []


def released(state: Any, workspace: Path) -> tuple[bool, str]:
    """A predicate with a reason: the agent remembers the release, and its notes exist."""
    SEEN_BY_PREDICATE.append((dict(state.memory), workspace))
    if state.memory.get("released") != "1.2.0":
        return False, f"memory has released={state.memory.get('released')!r}, not '1.2.0'"
    if not (workspace / "NOTES.md").is_file():
        return False, "NOTES.md is not written"
    return True, "1.2.0 released with notes"


def no_todo_left(state: Any, workspace: Path) -> bool:
    """A plain yes/no predicate over the workspace."""
    return not any("TODO" in p.read_text() for p in workspace.glob("*.py"))


def crashes(state: Any, workspace: Path) -> bool:
    """A predicate with a bug in it."""
    return bool(state.memory["never_set"])


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN_BY_PREDICATE.clear()


def of_kind(rt: Runtime, agent: str, kind: str) -> list[Any]:
    return [e for e in rt.store.read_events(agent) if e.kind == kind]


def assert_completed_with(rt: Runtime, agent: str, goal: str, checks: list[str]) -> list[Any]:
    """The goal was completed with passing evidence of ``checks``, carried to the finish
    and into a certificate that verifies; returns the evidence."""
    (done,) = [e for e in of_kind(rt, agent, Kind.GOAL_COMPLETED) if e.data["id"] == goal]
    evidence = done.data["evidence"]
    assert [e["check"] for e in evidence] == checks
    assert all(e["ok"] for e in evidence)
    assert all(len(e["digest"]) == 64 and e["at"] == done.at for e in evidence)
    (claimed,) = of_kind(rt, agent, Kind.FINISH_CLAIMED)
    (proof,) = [g for g in claimed.data["goals"] if g["id"] == goal]
    assert [e["check"] for e in proof["evidence"]] == checks  # checked again at finish
    certificate = journaled_certificate(rt.store, agent)
    assert [g["id"] for g in certificate["goals"]] == [goal]
    assert verify_certificate(rt.store, certificate) == []
    assert rt.store.load_state(agent).status == "completed"
    return list(evidence)


# -- predicate -------------------------------------------------------------------------

PREDICATE_GOAL = {"id": "release", "accept": [{"predicate": f"{HERE}:released"}]}


def test_a_passing_predicate_completes_the_goal_with_its_evidence(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [
            write("NOTES.md", "# 1.2.0\n"),
            {"remember": {"released": "1.2.0"}},
            {"complete_goal": "release"},
            {"finish": "released"},
        ],
        goals=[PREDICATE_GOAL],
        tools=["write_file"],
    )
    assert rt.run(agent, tools=TOOLS).state.status == "completed"
    (evidence,) = assert_completed_with(rt, agent, "release", [f"predicate {HERE}:released"])
    assert evidence["detail"] == "1.2.0 released with notes"
    assert evidence["digest"] == sha256_hex('[true,"1.2.0 released with notes"]')
    # it was given the agent's state and its workspace folder, at completion and at finish
    ws = rt.workspace(agent, "default").root
    assert SEEN_BY_PREDICATE == [({"released": "1.2.0"}, ws)] * 2
    rt.close()


def test_a_failing_predicate_leaves_the_goal_open_and_tells_the_model_why(
    tmp_path: Path,
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [
            {"remember": {"released": "1.1.9"}},
            {"complete_goal": "release"},  # step 2: the predicate says no
            write("NOTES.md", "# 1.2.0\n"),  # step 3 is decided seeing why
            {"remember": {"released": "1.2.0"}},
            {"complete_goal": "release"},
            {"finish": "released"},
        ],
        goals=[PREDICATE_GOAL],
        tools=["write_file"],
    )
    model, seen = contexts_seen(rt, agent)
    state = rt.run(agent, tools=TOOLS, model=model, max_steps=2).state
    assert state.goals[0]["status"] == "open"
    (rejected,) = of_kind(rt, agent, Kind.GOAL_REJECTED)
    reason = f"predicate {HERE}:released fails: memory has released='1.1.9', not '1.2.0'"
    assert rejected.data["reasons"] == [reason]
    assert rejected.data["evidence"][0]["ok"] is False
    assert of_kind(rt, agent, Kind.GOAL_COMPLETED) == []
    state = rt.run(agent, tools=TOOLS, model=model).state
    assert f"goal release is not complete: {reason}" in seen[2]
    assert reason not in seen[1]  # shown after the claim, not before
    assert state.status == "completed"
    assert_completed_with(rt, agent, "release", [f"predicate {HERE}:released"])
    rt.close()


def test_a_plain_boolean_predicate_is_judged_on_the_workspace(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [
            write("app.py", "x = 1  # TODO remove\n"),
            {"complete_goal": "clean"},
            write("app.py", "x = 1\n"),
            {"complete_goal": "clean"},
            {"finish": "clean"},
        ],
        goals=[{"id": "clean", "accept": [{"predicate": f"{HERE}:no_todo_left"}]}],
        tools=["write_file"],
    )
    model, seen = contexts_seen(rt, agent)
    assert rt.run(agent, tools=TOOLS, model=model).state.status == "completed"
    (rejected,) = of_kind(rt, agent, Kind.GOAL_REJECTED)
    assert rejected.data["reasons"] == [f"predicate {HERE}:no_todo_left fails: false"]
    assert f"goal clean is not complete: predicate {HERE}:no_todo_left fails: false" in seen[2]
    (evidence,) = assert_completed_with(rt, agent, "clean", [f"predicate {HERE}:no_todo_left"])
    assert evidence["detail"] == "true"
    rt.close()


def test_a_predicate_that_cannot_be_imported_fails_the_check_naming_it(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [{"complete_goal": "g"}, {"finish": "x"}],
        goals=[{"id": "g", "accept": [{"predicate": f"{HERE}:no_such_predicate"}]}],
    )
    state = rt.run(agent, tools=TOOLS).state
    assert state.goals[0]["status"] == "open" and state.status != "completed"
    (rejected,) = of_kind(rt, agent, Kind.GOAL_REJECTED)
    assert "has no 'no_such_predicate'" in rejected.data["reasons"][0]
    rt.close()


def test_a_predicate_that_raises_fails_the_check_instead_of_crashing_the_run(
    tmp_path: Path,
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [{"complete_goal": "g"}, {"finish": "x"}],
        goals=[{"id": "g", "accept": [{"predicate": f"{HERE}:crashes"}]}],
    )
    try:
        state = rt.run(agent, tools=TOOLS).state
        assert state.goals[0]["status"] == "open"
        (rejected,) = of_kind(rt, agent, Kind.GOAL_REJECTED)
        assert "never_set" in rejected.data["reasons"][0]
    finally:
        rt.close()


# -- files exist, file matches, file contains --------------------------------------------

FILES_GOAL = {
    "id": "shop",
    "accept": [
        {"files_exist": ["README.md", "shop/cart.py"]},
        {"file_matches": {"path": "README.md", "pattern": "^# Shop"}},
        {"file_contains": {"path": "shop/cart.py", "text": "compute_total"}},
    ],
}
FILES_CHECKS = [
    "files exist: README.md, shop/cart.py",
    "README.md matches /^# Shop/",
    "shop/cart.py contains 'compute_total'",
]


def test_file_checks_pass_when_the_files_say_so(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    readme = "Intro line\n# Shop\nmore\n"  # the pattern matches at the start of any line
    agent = make_agent(
        rt,
        tmp_path,
        [
            write("README.md", readme),
            write("shop/cart.py", "def compute_total(): ...\n"),
            {"complete_goal": "shop"},
            {"finish": "shop ready"},
        ],
        goals=[FILES_GOAL],
        tools=["write_file"],
    )
    assert rt.run(agent, tools=TOOLS).state.status == "completed"
    evidence = assert_completed_with(rt, agent, "shop", FILES_CHECKS)
    assert [e["detail"] for e in evidence] == ["all there", "found", "found"]
    assert evidence[1]["digest"] == sha256_hex(readme)  # what the check saw
    rt.close()


@pytest.mark.parametrize(
    ("files", "reasons"),
    [
        (
            {"README.md": "Shop\n# Shopping list\n"},  # matches, but cart.py is missing
            [
                "files exist: README.md, shop/cart.py fails: missing: shop/cart.py",
                "shop/cart.py contains 'compute_total' fails: shop/cart.py does not exist",
            ],
        ),
        (
            {"README.md": "## Shop\n", "shop/cart.py": "def calc_total(): ...\n"},
            [
                "README.md matches /^# Shop/ fails: not found",
                "shop/cart.py contains 'compute_total' fails: not found",
            ],
        ),
        (
            {"shop/cart.py": "compute_total\n"},
            [
                "files exist: README.md, shop/cart.py fails: missing: README.md",
                "README.md matches /^# Shop/ fails: README.md does not exist",
            ],
        ),
    ],
    ids=["missing file", "wrong content", "missing readme"],
)
def test_failing_file_checks_leave_the_goal_open_with_each_reason(
    tmp_path: Path, files: dict[str, str], reasons: list[str]
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(
        rt,
        tmp_path,
        [*(write(p, c) for p, c in files.items()), {"complete_goal": "shop"}, {"finish": "x"}],
        goals=[FILES_GOAL],
        tools=["write_file"],
    )
    model, seen = contexts_seen(rt, agent)
    state = rt.run(agent, tools=TOOLS, model=model).state
    assert state.goals[0]["status"] == "open" and state.status != "completed"
    rejected, *_ = of_kind(rt, agent, Kind.GOAL_REJECTED)
    assert rejected.data["reasons"] == reasons
    assert len(rejected.data["evidence"]) == 3  # every check ran, passing or not
    finish_context = seen[len(files) + 1]
    assert "goal shop is not complete: " + "; ".join(reasons) in finish_context
    (refused,) = of_kind(rt, agent, Kind.FINISH_REJECTED)
    assert refused.data["reasons"] == ["goal shop is not completed"]
    rt.close()


# -- sign-off --------------------------------------------------------------------------

SIGNOFF_GOAL = {"id": "review", "accept": [{"sign_off": True}]}
SIGNOFF_SCRIPT: list[Any] = [
    {"complete_goal": "review"},
    {"wait_for_input": "please sign off the review"},
    {"complete_goal": "review"},
    {"finish": "reviewed"},
]


def sign_off_with_cli(tmp_path: Path, agent: str, goal: str) -> int:
    return cli(["signoff", agent, goal], tmp_path)


@pytest.mark.parametrize("how", ["stead signoff", "runtime"])
def test_a_sign_off_check_passes_once_a_person_signed_off(
    tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = runtime_at(tmp_path, FakeClock(), person="carol@review")
    agent = make_agent(rt, tmp_path, SIGNOFF_SCRIPT, goals=[SIGNOFF_GOAL])
    model, seen = contexts_seen(rt, agent)
    state = rt.run(agent, tools=TOOLS, model=model).state
    assert state.status == "waiting" and state.goals[0]["status"] == "open"
    (rejected,) = of_kind(rt, agent, Kind.GOAL_REJECTED)
    reason = "a person's sign-off fails: not signed off yet"
    assert rejected.data["reasons"] == [reason]
    assert f"goal review is not complete: {reason}" in seen[1]

    if how == "stead signoff":
        assert sign_off_with_cli(tmp_path, agent, "review") == 0
        assert f"signed off goal review of {agent}" in capsys.readouterr().out
    else:
        rt.append_as_person(
            agent,
            lambda s: [NewEvent(Kind.GOAL_SIGNED_OFF, {"id": "review", "by": rt.person()})],
        )
    (signed,) = of_kind(rt, agent, Kind.GOAL_SIGNED_OFF)
    who = signed.data["by"]
    assert who == ("carol@review" if how == "runtime" else person())  # who signed, recorded
    assert rt.store.load_state(agent).goals[0]["status"] == "open"  # the model still claims it

    rt.send(agent, "signed off")
    assert rt.run(agent, tools=TOOLS, model=model).state.status == "completed"
    (evidence,) = assert_completed_with(rt, agent, "review", ["a person's sign-off"])
    assert evidence["detail"] == f"signed off by {who}"
    assert evidence["digest"] == sha256_hex(who)
    rt.close()


def test_signing_off_a_goal_the_agent_does_not_have_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(rt, tmp_path, SIGNOFF_SCRIPT, goals=[SIGNOFF_GOAL])
    rt.run(agent, tools=TOOLS)
    assert sign_off_with_cli(tmp_path, agent, "deploy") == 2
    assert f"agent {agent} has no goal deploy; goals: review" in capsys.readouterr().err
    assert of_kind(rt, agent, Kind.GOAL_SIGNED_OFF) == []
    rt.close()
