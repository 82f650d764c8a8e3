"""The ``stead`` command line, run in-process: output, JSON and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead.cli.main import build_parser, main


def write_agent(tmp_path: Path, script: list[Any], **spec: Any) -> Path:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {
        "name": "cli-test",
        "model": "scripted:script.yaml",
        "tools": ["read_file", "write_file", "list_files", "shell"],
        **spec,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'db' / 'stead.db'}"


def call(*argv: str) -> int:
    """``main``, with argparse's own exits turned into their code."""
    try:
        return main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    text = capsys.readouterr().out
    return code, json.loads(text) if text.strip().startswith(("{", "[")) else text


def test_run_show_trace_ls_and_audit(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(
        tmp_path,
        [
            {"tool": "write_file", "args": {"path": "a.txt", "content": "A"}},
            {"remember": {"k": "v"}},
            {"finish": "all done"},
        ],
    )
    code, result = run_json(capsys, "run", str(spec), "--id", "ag_one", "--store", store)
    assert code == 0
    assert result["status"] == "completed" and result["agent_id"] == "ag_one"

    code, state = run_json(capsys, "show", "ag_one", "--store", store)
    assert code == 0 and state["memory"] == {"k": "v"} and "a.txt" in state["manifest"]

    code, early = run_json(capsys, "show", "ag_one", "--at", "1", "--store", store)
    assert early["version"] == 1 and early["memory"] == {} and early["status"] == "created"

    assert main(["trace", "ag_one", "--store", store, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["seq"] for e in lines] == list(range(1, state["version"] + 1))
    assert lines[0]["kind"] == "agent_created"

    code, agents = run_json(capsys, "ls", "--store", store)
    assert [(a["agent_id"], a["status"]) for a in agents] == [("ag_one", "completed")]

    code, audit = run_json(capsys, "audit", "verify", "ag_one", "--store", store)
    assert code == 0 and audit["ok"] is True and audit["events"] == state["version"]

    # the same commands for people
    assert main(["show", "ag_one", "--store", store]) == 0
    assert "completed" in capsys.readouterr().out
    assert main(["trace", "ag_one", "--store", store]) == 0
    assert "finish_claimed" in capsys.readouterr().out
    assert main(["audit", "verify", "ag_one", "--store", store]) == 0
    assert "hash chain intact" in capsys.readouterr().out


def test_waiting_exits_3_and_send_continues(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [{"wait_for_input": "name?"}, {"finish": "thanks"}])
    code, result = run_json(capsys, "run", str(spec), "--id", "ag_w", "--store", store)
    assert code == 3 and result["status"] == "waiting"
    assert main(["resume", "ag_w", "--store", store]) == 3
    assert 'stead send ag_w "TEXT"' in capsys.readouterr().out
    code, result = run_json(capsys, "send", "ag_w", "Ada", "--no-resume", "--store", store)
    assert code == 3 and result["status"] == "running"
    code, result = run_json(capsys, "resume", "ag_w", "--store", store)
    assert code == 0 and result["status"] == "completed"
    assert main(["send", "ag_w", "late", "--store", store]) == 1
    assert "takes no more messages" in capsys.readouterr().err


def test_bad_input_exits_2_and_names_the_problem(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [{"finish": "x"}], autonomy="reckless")
    assert main(["run", str(spec), "--store", store]) == 2
    assert "spec field 'autonomy'" in capsys.readouterr().err
    assert main(["show", "ag_missing", "--store", store]) == 2
    assert "there is no store at" in capsys.readouterr().err  # and none was made
    assert main(["run", str(write_agent(tmp_path, [{"finish": "x"}])), "--store", store]) == 0
    assert main(["show", "ag_missing", "--store", store]) == 2
    assert "no agent with id ag_missing" in capsys.readouterr().err
    assert main(["ls", "--store", "ftp://nowhere"]) == 2
    assert "unknown store URL" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["resolve", "ag_x", "call_y", "--as", "maybe"])
    assert exc.value.code == 2


def test_a_failed_agent_exits_1(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [{"remember": {"i": 1}}] * 3, limits={"max_steps": 2})
    code, result = run_json(capsys, "run", str(spec), "--store", store)
    assert code == 1 and result["status"] == "failed"


def test_options_work_before_and_after_the_command(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [{"finish": "x"}])
    assert main(["--store", store, "--json", "run", str(spec), "--id", "ag_pos"]) == 0
    assert json.loads(capsys.readouterr().out)["agent_id"] == "ag_pos"


def test_the_store_url_comes_from_the_environment(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write_agent(tmp_path, [{"finish": "x"}])
    monkeypatch.setenv("STEAD_STORE", store)
    assert main(["run", str(spec), "--id", "ag_env"]) == 0
    capsys.readouterr()
    code, agents = run_json(capsys, "ls", "--store", store)
    assert code == 0
    assert [a["agent_id"] for a in agents] == ["ag_env"]


def test_every_command_is_documented() -> None:
    """The user guide's command table lists every command the parser has."""
    page = Path(__file__).parents[2] / "docs" / "guide" / "cli.md"
    readme = page.read_text(encoding="utf-8")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    missing = sorted(c for c in commands if f"stead {c}" not in readme)
    assert not missing, f"docs/guide/cli.md does not list: {missing}"


def test_tenant_scopes_every_command(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [{"finish": "x"}], tenant="acme")
    assert main(["run", str(spec), "--id", "ag_acme", "--store", store, "--tenant", "acme"]) == 0
    capsys.readouterr()
    for argv in (
        ["show", "ag_acme"],
        ["trace", "ag_acme"],
        ["audit", "verify", "ag_acme"],
        ["resume", "ag_acme"],
    ):
        assert main([*argv, "--store", store, "--tenant", "globex"]) == 2, argv
        assert "no agent with id ag_acme" in capsys.readouterr().err
    code, agents = run_json(capsys, "ls", "--store", store, "--tenant", "globex")
    assert code == 0 and agents == []
    code, agents = run_json(capsys, "ls", "--store", store, "--tenant", "acme")
    assert [a["agent_id"] for a in agents] == ["ag_acme"]
    # a spec of another tenant cannot be created through this tenant's view
    assert main(["run", str(spec), "--store", store, "--tenant", "globex"]) == 2
    assert "belongs to tenant globex" in capsys.readouterr().err
