"""The governance commands, run in-process on a SQLite store: approvals, grants,
autonomy and policies, with their output, JSON and exit codes."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead.cli.main import main
from stead.store.codec import unpack

WRITE = {"tool": "write_file", "args": {"path": "out.txt", "content": "hello"}}


def write_agent(tmp_path: Path, script: list[Any], **spec: Any) -> Path:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {
        "name": "gov-cli",
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


def workspace_file(tmp_path: Path, agent_id: str, name: str) -> Path:
    return tmp_path / "db" / "workspaces" / "default" / agent_id / name


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    text = capsys.readouterr().out
    return code, json.loads(text) if text.strip().startswith(("{", "[")) else text


def run_text(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def waiting_for_approval(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], agent_id: str = "ag_apr"
) -> str:
    """Run an act_with_approval agent into its write_file call; return the approval id."""
    spec = write_agent(tmp_path, [WRITE, {"finish": "done"}], autonomy="act_with_approval")
    code, out, _ = run_text(capsys, "run", str(spec), "--id", agent_id, "--store", store)
    assert code == 3, out
    code, pending = run_json(capsys, "approvals", "--store", store)
    assert code == 0 and len(pending) == 1
    return str(pending[0]["approval_id"])


def waiting_agent(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], agent_id: str = "ag_gov"
) -> str:
    """An agent that is waiting for input, so people can still change its authority."""
    spec = write_agent(tmp_path, [{"wait_for_input": "go?"}, {"finish": "ok"}])
    assert main(["run", str(spec), "--id", agent_id, "--store", store]) == 3
    capsys.readouterr()
    return agent_id


# -- approvals ---------------------------------------------------------------------------


def test_a_call_needing_approval_stops_the_run_and_says_how_to_answer(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [WRITE, {"finish": "done"}], autonomy="act_with_approval")
    code, out, _ = run_text(capsys, "run", str(spec), "--id", "ag_apr", "--store", store)
    assert code == 3
    assert "waiting" in out
    code, pending = run_json(capsys, "approvals", "--store", store)
    assert code == 0
    [a] = pending
    aid = a["approval_id"]
    assert aid.startswith("apr_")
    assert (a["agent_id"], a["tool"], a["status"]) == ("ag_apr", "write_file", "requested")
    assert "act_with_approval" in a["reason"]
    assert f"stead approve {aid}" in out
    assert f"stead deny {aid}" in out
    assert not workspace_file(tmp_path, "ag_apr", "out.txt").exists()
    # the text listing names it too
    code, listing, _ = run_text(capsys, "approvals", "--store", store)
    assert code == 0 and aid in listing and "ag_apr" in listing and "write_file" in listing


def test_approve_then_resume_runs_the_call_and_completes(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    aid = waiting_for_approval(tmp_path, store, capsys)
    code, out, _ = run_text(capsys, "approve", aid, "--valid-for", "15m", "--store", store)
    assert code == 0
    assert f"approved {aid} for 900 s" in out and "stead resume ag_apr" in out
    code, pending = run_json(capsys, "approvals", "--store", store)
    assert code == 0 and pending == []
    code, result = run_json(capsys, "resume", "ag_apr", "--store", store)
    assert code == 0 and result["status"] == "completed"
    assert workspace_file(tmp_path, "ag_apr", "out.txt").read_text(encoding="utf-8") == "hello"
    code, state = run_json(capsys, "show", "ag_apr", "--store", store)
    [call] = [c for c in state["recent_calls"] if c["tool"] == "write_file"]
    assert call["ok"] is True
    assert state["approvals"] == {}  # used up


def test_an_approval_is_single_use_and_cannot_be_answered_twice(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    aid = waiting_for_approval(tmp_path, store, capsys)
    assert main(["approve", aid, "--store", store]) == 0
    capsys.readouterr()
    code, _, err = run_text(capsys, "approve", aid, "--store", store)
    assert code == 2 and f"no approval {aid} is waiting" in err
    code, _, err = run_text(capsys, "deny", aid, "--reason", "late", "--store", store)
    assert code == 2 and f"no approval {aid} is waiting" in err


def test_deny_makes_the_model_see_a_refusal_with_the_reason(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    aid = waiting_for_approval(tmp_path, store, capsys)
    code, out, _ = run_text(capsys, "deny", aid, "--reason", "not on a Friday", "--store", store)
    assert code == 0 and f"denied {aid}" in out
    code, result = run_json(capsys, "resume", "ag_apr", "--store", store)
    assert code == 0 and result["status"] == "completed"
    code, state = run_json(capsys, "show", "ag_apr", "--store", store)
    [call] = [c for c in state["recent_calls"] if c["tool"] == "write_file"]
    assert call["ok"] is False
    assert "not on a Friday" in call["error"] and aid in call["error"]
    assert call["error"].startswith("refused:")
    assert not workspace_file(tmp_path, "ag_apr", "out.txt").exists()


def test_a_denial_needs_a_reason(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    aid = waiting_for_approval(tmp_path, store, capsys)
    with pytest.raises(SystemExit) as exc:
        main(["deny", aid, "--store", store])
    assert exc.value.code == 2
    assert "--reason" in capsys.readouterr().err
    code, _, err = run_text(capsys, "deny", aid, "--reason", "   ", "--store", store)
    assert code == 2 and "needs a reason" in err
    code, pending = run_json(capsys, "approvals", "--store", store)
    assert [a["approval_id"] for a in pending] == [aid]  # still waiting


def test_answering_an_unknown_approval_exits_2(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_text(capsys, "approve", "apr_nope", "--store", store)
    assert code == 2 and "no approval apr_nope is waiting" in err


# -- grants, scope, autonomy ----------------------------------------------------------------


def test_grant_shows_in_scope_with_its_constraint_and_revoke_removes_it(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = waiting_agent(tmp_path, store, capsys)
    code, before = run_json(capsys, "scope", agent, "--store", store)
    assert code == 0
    granted_from = time.time()
    code, made = run_json(
        capsys,
        "grant", agent, "shell",
        "--arg", "cmd=glob:ls*",
        "--max-uses", "2",
        "--valid-for", "1h",
        "--reason", "look around",
        "--store", store,
    )  # fmt: skip
    granted_by = time.time()
    assert code == 0
    gid = made["id"]
    assert gid.startswith("gr_")
    assert made["args"] == {"cmd": {"glob": "ls*"}} and made["max_uses"] == 2
    assert made["valid_until"] is not None and made["reason"] == "look around"
    code, scope = run_json(capsys, "scope", agent, "--store", store)
    assert code == 0
    grants = {g["id"]: g for g in scope["grants"]}
    assert set(grants) == {g["id"] for g in before["grants"]} | {gid}
    shown = grants[gid]
    assert shown["tool"] == "shell"
    assert shown["args"] == {"cmd": {"glob": "ls*"}}
    assert (shown["max_uses"], shown["uses"], shown["inactive"]) == (2, 0, None)
    assert shown["valid_until"] == made["valid_until"]
    # an hour from when it was granted, by the runtime's (system) clock
    assert granted_from + 3600 <= shown["valid_until"] <= granted_by + 3600
    # the text form describes it for people
    code, text, _ = run_text(capsys, "scope", agent, "--store", store)
    assert code == 0 and gid in text and "ls*" in text and "0/2 uses" in text

    code, out, _ = run_text(capsys, "revoke", agent, gid, "--reason", "done", "--store", store)
    assert code == 0 and f"revoked {gid}" in out
    code, scope = run_json(capsys, "scope", agent, "--store", store)
    assert gid not in {g["id"] for g in scope["grants"]}
    assert {g["id"] for g in scope["grants"]} == {g["id"] for g in before["grants"]}
    code, _, err = run_text(capsys, "revoke", agent, gid, "--store", store)
    assert code == 2 and f"holds no grant {gid}" in err


def test_autonomy_is_reflected_in_scope(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = waiting_agent(tmp_path, store, capsys)
    code, scope = run_json(capsys, "scope", agent, "--store", store)
    assert scope["autonomy"] == "act_autonomously" and scope["tool_autonomy"] == {}
    code, out, _ = run_text(capsys, "autonomy", agent, "observe", "--store", store)
    assert code == 0 and "now observe" in out
    code, out, _ = run_text(
        capsys, "autonomy", agent, "act_with_approval", "--tool", "shell", "--store", store
    )
    assert code == 0
    code, scope = run_json(capsys, "scope", agent, "--store", store)
    assert scope["autonomy"] == "observe"
    assert scope["tool_autonomy"] == {"shell": "act_with_approval"}
    with pytest.raises(SystemExit) as exc:
        main(["autonomy", agent, "reckless", "--store", store])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_authority_of_a_finished_agent_is_closed(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [{"finish": "x"}])
    assert main(["run", str(spec), "--id", "ag_done", "--store", store]) == 0
    capsys.readouterr()
    code, _, err = run_text(capsys, "grant", "ag_done", "shell", "--store", store)
    assert code == 2 and "authority is closed" in err


def stop_leaked_heartbeats(agent_id: str) -> None:
    """Stop lease heartbeats an activation left running, before the test's store goes away
    (a heartbeat renewing on a closed store fails in its thread, during some later test)."""
    for thread in threading.enumerate():  # (Thread keeps its target while it runs)
        owner = getattr(getattr(thread, "_target", None), "__self__", None)
        if thread.name == f"lease-{agent_id}" and owner is not None:
            owner.stop()


def test_a_resume_refused_by_the_ledger_check_leaves_the_agent_free(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A widened grant event stops the agent (exit 1), and gives its lease back: a second
    resume meets the same integrity error, not a lease held by nobody ('busy', exit 4)."""
    agent = waiting_agent(tmp_path, store, capsys)
    conn = sqlite3.connect(tmp_path / "db" / "stead.db", isolation_level=None)
    try:
        rows = conn.execute(
            "SELECT seq, data FROM events WHERE agent_id = ? AND kind = 'grant_added'", (agent,)
        ).fetchall()
        texts = [(seq, unpack(data, f"event {seq}")) for seq, data in rows]
        (seq, text), *others = [(s, t) for s, t in texts if '"tool":"shell"' in t]
        assert not others
        conn.execute(
            "UPDATE events SET data = ? WHERE agent_id = ? AND seq = ?",
            (text.replace('"tool":"shell"', '"tool":"*"'), agent, seq),
        )
    finally:
        conn.close()
    try:
        for _ in range(2):
            code, _, err = run_text(capsys, "resume", agent, "--store", store)
            assert code == 1, err
            assert "does not match its hash" in err
    finally:
        stop_leaked_heartbeats(agent)


@pytest.mark.parametrize(
    ("arg", "problem"),
    [
        ("cmd", "write NAME=KIND:VALUE"),
        ("cmd=ls", "write NAME=KIND:VALUE"),
        ("=glob:ls", "write NAME=KIND:VALUE"),
        ("n=max:lots", "max takes a number"),
        ("n=min:", "min takes a number"),
        ("cmd=regex:ls.*", "unknown constraint 'regex'"),
        ("cmd=glob:", "must be a non-empty pattern"),
        ("url=hosts:", "must be a non-empty list"),
    ],
)
def test_a_malformed_arg_constraint_exits_2_and_grants_nothing(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], arg: str, problem: str
) -> None:
    agent = waiting_agent(tmp_path, store, capsys)
    code, before = run_json(capsys, "scope", agent, "--store", store)
    code, _, err = run_text(capsys, "grant", agent, "shell", "--arg", arg, "--store", store)
    assert code == 2
    assert problem in err
    code, after = run_json(capsys, "scope", agent, "--store", store)
    assert after["grants"] == before["grants"]


@pytest.mark.parametrize("uses", ["0", "-1"])
def test_max_uses_below_one_exits_2_and_names_the_field(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], uses: str
) -> None:
    agent = waiting_agent(tmp_path, store, capsys)
    code, _, err = run_text(capsys, "grant", agent, "shell", "--max-uses", uses, "--store", store)
    assert code == 2 and "grant.max_uses" in err and "at least 1" in err


@pytest.mark.parametrize("command", ["grant", "approve"])
@pytest.mark.parametrize("value", ["0", "abc", "15x", "0s", "0.0h", "1w"])
def test_a_bad_duration_is_refused_by_the_parser(
    store: str, capsys: pytest.CaptureFixture[str], command: str, value: str
) -> None:
    argv = ["grant", "ag_x", "shell"] if command == "grant" else ["approve", "apr_x"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--valid-for", value, "--store", store])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--valid-for" in err
    assert f"{value!r} is not a duration; write it like 90s, 15m, 2h or 1d" in err


# -- policies ----------------------------------------------------------------------------------


def test_policy_set_refuses_a_broken_file_and_stores_a_good_one(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.cedar"
    broken.write_text("permit(principal, action,", encoding="utf-8")
    code, _, err = run_text(capsys, "policy", "set", str(broken), "--store", store)
    assert code == 2
    assert "does not parse as Cedar" in err and "nothing was stored" in err
    code, _, err = run_text(capsys, "policy", "show", "--store", store)
    assert code == 2 and "has no policy" in err

    empty = tmp_path / "empty.cedar"
    empty.write_text("// nothing yet\n", encoding="utf-8")
    code, _, err = run_text(capsys, "policy", "set", str(empty), "--store", store)
    assert code == 2 and "holds no policies" in err

    good = tmp_path / "good.cedar"
    text = '@id("all")\npermit(principal, action, resource);\n'
    good.write_text(text, encoding="utf-8")
    code, out, _ = run_text(capsys, "policy", "set", str(good), "--store", store)
    assert code == 0 and "policy version 1 of tenant default is in force" in out
    code, result = run_json(capsys, "policy", "set", str(good), "--store", store)
    assert code == 0 and result == {"tenant": "default", "version": 2}

    code, out, _ = run_text(capsys, "policy", "show", "--store", store)
    assert code == 0
    assert out.startswith("# version 2, set by ")
    assert text.strip() in out
    code, shown = run_json(capsys, "policy", "show", "--version", "1", "--store", store)
    assert code == 0 and (shown["version"], shown["text"]) == (1, text)
    code, _, err = run_text(capsys, "policy", "show", "--version", "9", "--store", store)
    assert code == 2 and "has no policy version 9" in err


def test_policy_set_of_a_missing_file_exits_2(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_text(capsys, "policy", "set", str(tmp_path / "nope.cedar"), "--store", store)
    assert code == 2 and "cannot read policy file" in err


def test_a_policy_forbid_refuses_the_call_and_the_model_sees_why(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text(
        'permit(principal, action, resource);\n@id("no writes")\n'
        'forbid(principal, action, resource == Tool::"write_file");\n',
        encoding="utf-8",
    )
    assert main(["policy", "set", str(policy), "--store", store]) == 0
    capsys.readouterr()
    spec = write_agent(tmp_path, [WRITE, {"finish": "done"}])
    code, result = run_json(capsys, "run", str(spec), "--id", "ag_pol", "--store", store)
    assert code == 0 and result["status"] == "completed"
    code, state = run_json(capsys, "show", "ag_pol", "--store", store)
    [call] = [c for c in state["recent_calls"] if c["tool"] == "write_file"]
    assert call["ok"] is False and "policy version 1 denies it" in call["error"]
    assert "no writes" in call["error"]
    assert not workspace_file(tmp_path, "ag_pol", "out.txt").exists()


def test_a_policy_ask_stops_even_an_autonomous_agent_for_approval(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text(
        "permit(principal, action, resource);\n"
        '@ask\npermit(principal, action, resource == Tool::"write_file");\n',
        encoding="utf-8",
    )
    assert main(["policy", "set", str(policy), "--store", store]) == 0
    capsys.readouterr()
    spec = write_agent(tmp_path, [WRITE, {"finish": "done"}])
    code, out, _ = run_text(capsys, "run", str(spec), "--id", "ag_ask", "--store", store)
    assert code == 3
    code, pending = run_json(capsys, "approvals", "--store", store)
    [a] = pending
    assert a["policy_version"] == 1 and "asks for a person" in a["reason"]
    assert f"stead approve {a['approval_id']}" in out


def test_an_argument_constrained_twice_is_refused_rather_than_widened(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = waiting_agent(tmp_path, store, capsys)
    code, before = run_json(capsys, "scope", agent, "--store", store)
    code, _, err = run_text(
        capsys, "grant", agent, "deploy",
        "--arg", "size=max:5", "--arg", "size=min:1",
        "--store", store,
    )  # fmt: skip
    assert code == 2 and "--arg size is given twice" in err
    code, after = run_json(capsys, "scope", agent, "--store", store)
    assert after["grants"] == before["grants"]


def test_one_of_keeps_numbers_as_numbers_and_quoted_text_as_text(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = waiting_agent(tmp_path, store, capsys)
    code, made = run_json(
        capsys, "grant", agent, "deploy",
        "--arg", 'size=one_of:1,2.5,"3",large,007,1.10,nan,1_000',
        "--store", store,
    )  # fmt: skip
    assert code == 0
    assert made["args"] == {
        "size": {"one_of": [1, 2.5, "3", "large", "007", "1.10", "nan", "1_000"]}
    }


def test_autonomy_for_a_tool_the_spec_does_not_list_says_so(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = waiting_agent(tmp_path, store, capsys)
    code, _, err = run_text(
        capsys, "autonomy", agent, "observe", "--tool", "shel", "--store", store
    )
    assert code == 0 and "lists no tool named shel" in err and "shell" in err
    code, _, err = run_text(
        capsys, "autonomy", agent, "observe", "--tool", "shell", "--store", store
    )
    assert code == 0 and err == ""
