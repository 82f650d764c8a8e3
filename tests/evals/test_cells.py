"""One cell at a time: each condition's boundary is injected, and its journal shows it.

The agent is the demo's refactoring agent under governance
(``agents/governed``): it posts to a changelog outside its workspace once (an
effect that must never repeat), and waits for a person's approval of that post
(the wait a hibernation needs). Every cell runs in real worker processes.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from stead.evals.cell import CellPlan, run_cell
from stead.evals.suite import Condition, Suite, load_suite
from tests.needs import missing
from tests.postgres import connect, fresh_schema, url_for

AGENT = Path(__file__).parents[2] / "examples" / "evals" / "demo" / "governed.yaml"
KEY = base64.b64encode(secrets.token_bytes(32)).decode()


def suite(tmp_path: Path, approve: str = "all") -> Suite:
    path = tmp_path / "suite.yaml"
    path.write_text(
        f"tasks: [{{id: t, spec: {AGENT}, approve: {approve},"
        " env: {STEAD_DEMO_CHANGELOG: '{cell}/changelog.txt'}}]",
        encoding="utf-8",
    )
    return load_suite(path)


def cell(tmp_path: Path, condition: Condition, at: int | None, **more: Any) -> dict[str, Any]:
    task = suite(tmp_path).tasks[0]
    folder = tmp_path / condition.label
    return run_cell(CellPlan(task, condition, 0, at, folder, KEY, timeout=120, **more))


def changelog(tmp_path: Path, label: str) -> list[str]:
    return (tmp_path / label / "changelog.txt").read_text(encoding="utf-8").splitlines()


def test_the_baseline_completes_certified_with_its_one_approval(tmp_path: Path) -> None:
    record = cell(tmp_path, Condition("baseline", "baseline"), None)
    assert record["error"] is None and record["injected"] is None
    m = record["metrics"]
    assert m["completion"]["completed"] and m["completion"]["certificate_ok"]
    assert m["adherence"]["approvals_asked"] == 1
    assert len(changelog(tmp_path, "baseline")) == 1
    assert record["workers"] >= 2 and record["cpu_seconds"] > 0
    assert (tmp_path / "baseline" / "cell.json").exists()


@pytest.mark.parametrize(
    ("condition", "at", "shown"),
    [
        (Condition("kill", "kill"), 6, ["tool_intent", "activation_started", "reconciled"]),
        (Condition("hibernate", "hibernate"), 3, ["hibernated", "restored"]),
        (Condition("move", "move"), 4, ["agent_moved", "agent_imported"]),
        (Condition("model_swap", "model_swap"), 4, ["model_changed"]),
        (Condition("grant_lapse", "grant_lapse", tool="format_code"), 6, ["grant_revoked"]),
    ],
)
def test_each_boundary_is_injected_and_proven_by_the_journal(
    tmp_path: Path, condition: Condition, at: int, shown: list[str]
) -> None:
    record = cell(tmp_path, condition, at)
    assert record["error"] is None, record["error"]
    proof = record["injected"]["proof"]
    assert [p["kind"] for p in proof] == shown
    assert record["injected"]["at"] >= at
    m = record["metrics"]
    assert m["completion"]["completed"] and m["completion"]["certificate_ok"]
    assert m["effects"]["repeated"] == [] and m["effects"]["lost"] == []
    # the post outside the workspace happened once, whatever the boundary
    assert len(changelog(tmp_path, condition.label)) == 1
    asked = m["adherence"]["approvals_asked"]
    # the lapsed grant's next call is asked of the person (approved: same outcome)
    assert asked == (2 if condition.kind == "grant_lapse" else 1)


def test_a_kill_lands_mid_step_after_the_intent_and_the_worker_is_gone(tmp_path: Path) -> None:
    record = cell(tmp_path, Condition("kill", "kill"), 6)
    held = record["injected"]["held"]
    assert held["tool"] == "post_changelog" and held["decision"] == 6
    # the killed worker's log ends without its closing line: it never finished
    assert record["workers"] >= 2


def test_conditions_that_cannot_apply_say_why_and_run_nothing(tmp_path: Path) -> None:
    compact = cell(tmp_path, Condition("compact", "compact"), 3)
    assert "scripted model keeps no conversation" in compact["not_applicable"]
    restart = cell(tmp_path, Condition("db_restart", "db_restart"), 3)
    assert "SQLite runs inside the worker" in restart["not_applicable"]
    assert compact["metrics"] is None and compact["workers"] == 0


def test_a_point_past_the_end_is_an_error_not_a_pass(tmp_path: Path) -> None:
    record = cell(tmp_path, Condition("kill", "kill"), 40)
    assert "was not injected" in record["error"] and record["injected"] is None


def test_a_hibernation_needs_a_wait_and_says_so_without_one(tmp_path: Path) -> None:
    record = cell(tmp_path, Condition("hibernate", "hibernate"), 7)  # after the only wait
    assert "only an agent waiting for the world" in record["error"]


def test_the_person_who_denies_is_measured_not_hidden(tmp_path: Path) -> None:
    task = suite(tmp_path, approve="none").tasks[0]
    record = run_cell(
        CellPlan(
            task, Condition("baseline", "baseline"), 0, None, tmp_path / "denied", KEY, timeout=120
        )
    )
    assert record["error"] is None
    assert record["metrics"]["adherence"]["approvals_asked"] == 1
    assert not (tmp_path / "denied" / "changelog.txt").exists()


def test_a_database_restart_drops_the_workers_connections_mid_step(tmp_path: Path) -> None:
    with fresh_schema() as schema:  # skips without PostgreSQL (fails in CI)
        url = url_for(schema)
        record = cell(tmp_path, Condition("db_restart", "db_restart"), 6, store=url)
        baseline = cell(tmp_path, Condition("baseline", "baseline"), None, store=url)
    assert record["error"] is None, record["error"]
    detail = record["injected"]["detail"]
    dropped = int(detail.split()[0])
    assert dropped >= 1, detail
    kinds = [p["kind"] for p in record["injected"]["proof"]]
    assert kinds[0] == "tool_intent" and kinds[-1] in ("tool_result", "reconciled")
    assert record["metrics"]["completion"]["completed"]
    assert record["metrics"]["effects"]["repeated"] == []
    assert len(changelog(tmp_path, "db_restart")) == 1
    assert baseline["metrics"]["completion"]["completed"]


def test_a_kill_during_a_command_leaves_it_to_the_person_who_retries(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(
        f"tasks: [{{id: t, spec: {AGENT}, resolve: retry,"
        " env: {STEAD_DEMO_CHANGELOG: '{cell}/changelog.txt'}}]",
        encoding="utf-8",
    )
    task = load_suite(path).tasks[0]
    record = run_cell(
        CellPlan(task, Condition("kill", "kill"), 0, 8, tmp_path / "k", KEY, timeout=120)
    )
    assert record["injected"]["held"]["tool"] == "shell"  # effectful, no reconcile hook
    effects = record["metrics"]["effects"]
    assert effects["unknown"] == 1 and effects["retried"] == [record["injected"]["held"]["call_id"]]
    assert effects["repeated"] == [] and effects["lost"] == []
    assert record["metrics"]["completion"]["completed"]


def restart_command() -> str:
    """The command that restarts this machine's PostgreSQL at 127.0.0.1:5432."""
    if shutil.which("pg_lsclusters") is None or os.geteuid() != 0:
        missing("no pg_lsclusters, or not root: cannot restart PostgreSQL", "restart PostgreSQL")
    listed = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        version, name, port = line.split()[:3]
        if port == "5432":
            return f"pg_ctlcluster {version} {name} restart"
    missing(f"no cluster on port 5432 in: {listed!r}", "run PostgreSQL from a cluster")


def test_a_real_database_server_restart_mid_step(tmp_path: Path) -> None:
    schema = f"stead_test_{secrets.token_hex(6)}"
    with connect():  # skips without PostgreSQL (fails in CI)
        command = restart_command()
    try:
        record = cell(
            tmp_path,
            Condition("db_restart", "db_restart"),
            6,
            store=url_for(schema),
            restart=command,
        )
    finally:  # on a connection made after the restart: those before it were ended
        with connect() as admin:
            admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
    assert record["error"] is None, record["error"]
    assert "the database server restarted" in record["injected"]["detail"]
    kinds = [p["kind"] for p in record["injected"]["proof"]]
    # the worker lost its connections with the server: a new worker took the step over
    assert kinds[:2] == ["tool_intent", "activation_started"]
    assert record["metrics"]["completion"]["completed"]
    assert record["metrics"]["effects"]["repeated"] == []
    assert len(changelog(tmp_path, "db_restart")) == 1
