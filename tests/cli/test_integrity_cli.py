"""The integrity commands in-process on a SQLite store: certificate, verify-certificate,
check, lineage, impact, quarantine and rollback, with their output, JSON and exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from stead.cli.main import main
from stead.store.codec import unpack
from stead.store.sqlite import SqliteStore

from .test_governance_cli import run_json, run_text, workspace_file, write_agent

TOKEN = "TOKEN-abc123xyz-42"
FLOW_SCRIPT: list[Any] = [
    {"tool": "write_file", "args": {"path": "src.txt", "content": TOKEN + "\n"}},
    {"tool": "read_file", "args": {"path": "src.txt"}},  # step 2: the result others use
    {"tool": "write_file", "args": {"path": "other.txt", "content": "independent work"}},
    {"tool": "write_file", "args": {"path": "dst.txt", "content": f"copied {TOKEN}"}},
    {"finish": "copied"},
]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'db' / 'stead.db'}"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    from stead.sandbox.secrets import new_key

    monkeypatch.setenv("STEAD_SECRET_KEY", new_key())


def trace(capsys: pytest.CaptureFixture[str], agent: str, store: str) -> list[dict[str, Any]]:
    assert main(["trace", agent, "--store", store, "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def steps_of(events: list[dict[str, Any]]) -> dict[int, dict[str, int]]:
    """For each step: the seqs of its decision, intent, result and step_completed."""
    out: dict[int, dict[str, int]] = {}
    step = 0
    for e in events:
        if e["kind"] == "decision":
            step = e["data"]["step"]
            out[step] = {"decision": e["seq"]}
        elif e["kind"] in ("tool_intent", "tool_result", "step_completed") and step:
            out[step][e["kind"].removeprefix("tool_")] = e["seq"]
    return out


def run_agent(
    tmp_path: Path,
    store: str,
    capsys: pytest.CaptureFixture[str],
    agent: str,
    script: list[Any],
    *extra: str,
    **spec: Any,
) -> int:
    folder = tmp_path / agent
    folder.mkdir()
    code, _, _ = run_text(
        capsys, "run", str(write_agent(folder, script, **spec)), "--id", agent,
        "--store", store, *extra,
    )  # fmt: skip
    return code


# -- certificates --------------------------------------------------------------------------


def test_certificate_prints_one_that_verify_certificate_accepts(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], key: None
) -> None:
    goal = {"id": "copy", "accept": [{"files_exist": ["dst.txt"]}]}
    script = [*FLOW_SCRIPT[:-1], {"complete_goal": "copy"}, {"finish": "copied"}]
    assert run_agent(tmp_path, store, capsys, "ag_cert", script, goals=[goal]) == 0
    code, out, _ = run_text(capsys, "certificate", "ag_cert", "--store", store)
    assert code == 0
    certificate = json.loads(out)
    assert certificate["kind"] == "completion_certificate"
    assert certificate["agent_id"] == "ag_cert" and certificate["summary"] == "copied"
    assert [g["id"] for g in certificate["goals"]] == ["copy"]
    events = trace(capsys, "ag_cert", store)
    (claimed,) = [e for e in events if e["kind"] == "finish_claimed"]
    assert certificate["version"] == claimed["seq"]

    cert_file = tmp_path / "cert.json"
    cert_file.write_text(out)
    code, out, err = run_text(capsys, "verify-certificate", str(cert_file), "--store", store)
    assert code == 0, err
    at = claimed["seq"]
    assert f"certificate verifies: agent ag_cert completed at journal version {at}" in out
    code, result = run_json(capsys, "verify-certificate", str(cert_file), "--store", store)
    assert code == 0 and result == {"ok": True, "problems": []}

    # the same certificate claiming another version is refused, naming the problem
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**certificate, "version": certificate["version"] - 1}))
    code, _, err = run_text(capsys, "verify-certificate", str(edited), "--store", store)
    assert code == 1 and "certificate does not verify" in err and "signature" in err


def test_certificate_of_an_agent_without_one_says_why(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEAD_SECRET_KEY", raising=False)
    monkeypatch.delenv("STEAD_SECRET_KEY_FILE", raising=False)
    assert run_agent(tmp_path, store, capsys, "ag_nokey", FLOW_SCRIPT) == 0
    code, out, err = run_text(capsys, "certificate", "ag_nokey", "--store", store)
    assert code == 2 and out == ""
    assert "agent ag_nokey has no completion certificate" in err and "vault key" in err
    code, _, err = run_text(capsys, "verify-certificate", str(tmp_path / "nope.json"))
    assert code == 2 and "cannot read" in err
    (tmp_path / "junk.json").write_text("not json {")
    code, _, err = run_text(capsys, "verify-certificate", str(tmp_path / "junk.json"))
    assert code == 2 and "is not JSON" in err


# -- check ---------------------------------------------------------------------------------

READ = {"tool": "read_file", "args": {"path": "a.txt"}}
LOOPING: list[Any] = [
    {"tool": "write_file", "args": {"path": "a.txt", "content": "hello"}},
    READ,
    READ,
    READ,  # the third identical read is blocked
    {"finish": "done"},
]


def test_check_names_the_violation_the_live_run_recorded(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_agent(tmp_path, store, capsys, "ag_loop", LOOPING, monitors={"loop": {"repeat": 3}})
    assert code == 0
    steps = steps_of(trace(capsys, "ag_loop", store))
    code, out, err = run_text(capsys, "check", "ag_loop", "--store", store)
    assert code == 0 and err == ""
    assert f"event {steps[4]['result']}: loop (block):" in out
    assert "1 violation(s); the live run recorded 1" in out
    code, report = run_json(capsys, "check", "ag_loop", "--store", store)
    assert code == 0 and report["same_as_live"] is True
    (v,) = report["violations"]
    assert (v["rule"], v["verdict"], v["seq"]) == ("loop", "block", steps[4]["result"])
    assert v["events"] == [steps[2]["result"], steps[3]["result"]]
    assert [{k: v[k] for k in ("rule", "verdict", "message", "events")}] == report["journaled"]


def test_check_of_a_clean_run_reports_none(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_agent(tmp_path, store, capsys, "ag_clean", FLOW_SCRIPT) == 0
    code, out, _ = run_text(capsys, "check", "ag_clean", "--store", store)
    assert code == 0 and out.strip() == "0 violation(s); the live run recorded 0"
    code, report = run_json(capsys, "check", "ag_clean", "--store", store)
    assert code == 0 and report == {"violations": [], "journaled": [], "same_as_live": True}


def test_check_refuses_a_stored_spec_edited_since_the_run(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Loosening the monitors in the stored spec no longer makes the replay disagree:
    the spec is sealed, so the edit is refused before anything it names is loaded."""
    code = run_agent(tmp_path, store, capsys, "ag_edit", LOOPING, monitors={"loop": {"repeat": 3}})
    assert code == 0
    db = sqlite3.connect(tmp_path / "db" / "stead.db")
    with db:
        (spec,) = db.execute("SELECT spec FROM agents WHERE agent_id = 'ag_edit'").fetchone()
        loosened = json.loads(unpack(spec, "the spec"))
        loosened["monitors"] = {"loop": {"repeat": 10}}  # someone edited the stored spec
        db.execute("UPDATE agents SET spec = ? WHERE agent_id = 'ag_edit'", (json.dumps(loosened),))
    db.close()
    code, out, err = run_text(capsys, "check", "ag_edit", "--store", store)
    assert code == 1 and "violation(s)" not in out
    assert "its spec" in err and "edited outside stead" in err, err
    assert "stead audit verify ag_edit" in err


# -- provenance ----------------------------------------------------------------------------


def test_lineage_and_impact_name_the_expected_events(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_agent(tmp_path, store, capsys, "ag_prov", FLOW_SCRIPT) == 0
    steps = steps_of(trace(capsys, "ag_prov", store))
    read, copy = steps[2]["result"], steps[4]

    code, nodes = run_json(capsys, "impact", "ag_prov", str(read), "--store", store)
    assert code == 0
    assert [n["seq"] for n in nodes] == [copy["intent"], copy["result"]]  # not step 3
    code, out, _ = run_text(capsys, "impact", "ag_prov", str(read), "--store", store)
    assert code == 0
    listed = [int(line.split()[0]) for line in out.splitlines()]
    assert listed == [copy["intent"], copy["result"]] and "write_file" in out

    code, nodes = run_json(capsys, "lineage", "ag_prov", str(copy["result"]), "--store", store)
    assert code == 0
    by_seq = {n["seq"]: n for n in nodes}
    assert set(by_seq) == {steps[2]["decision"], read, copy["decision"]}
    assert by_seq[read]["tool"] == "read_file" and "flowed into" in by_seq[read]["why"]
    code, out, _ = run_text(capsys, "lineage", "ag_prov", str(copy["result"]), "--store", store)
    assert code == 0
    assert sorted(int(line.split()[0]) for line in out.splitlines()) == sorted(by_seq)
    assert steps[3]["result"] not in by_seq  # the independent write is not upstream

    independent = steps[3]["result"]
    code, out, _ = run_text(capsys, "impact", "ag_prov", str(independent), "--store", store)
    assert code == 0 and out.strip() == f"event {independent}: nothing downstream"


def test_quarantine_journals_it_flags_downstream_and_stops_the_agent(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_agent(tmp_path, store, capsys, "ag_q", FLOW_SCRIPT, "--max-steps", "4")
    assert code == 3  # running, not yet finished
    steps = steps_of(trace(capsys, "ag_q", store))
    read, copy = steps[2]["result"], steps[4]
    code, out, _ = run_text(
        capsys, "quarantine", "ag_q", str(read), "--reason", "src.txt was forged",
        "--store", store,
    )  # fmt: skip
    assert code == 0
    assert (
        f"quarantined event {read}; flagged downstream: {copy['intent']}, {copy['result']}; "
        "agent is needs_attention" in out
    )
    events = trace(capsys, "ag_q", store)
    (v,) = [e["data"] for e in events if e["kind"] == "violation"]
    assert v["rule"] == "quarantine" and v["verdict"] == "suspend"
    assert v["events"] == [read, copy["intent"], copy["result"]]
    assert "src.txt was forged" in v["message"]
    code, shown = run_json(capsys, "show", "ag_q", "--store", store)
    assert shown["status"] == "needs_attention" and v["violation_id"] in shown["violations"]
    code, out, _ = run_text(capsys, "resume", "ag_q", "--store", store)
    assert code == 3  # it stays stopped until a person clears it
    assert run_text(capsys, "check", "ag_q", "--store", store)[0] == 0  # not a monitor's
    code, _, _ = run_text(
        capsys, "clear", "ag_q", v["violation_id"], "--reason", "re-read, fine", "--store", store
    )
    assert code == 0
    code, done = run_json(capsys, "resume", "ag_q", "--store", store)
    assert code == 0 and done["status"] == "completed"


# -- rollback ------------------------------------------------------------------------------


def test_rollback_to_a_version_restores_the_files_and_journals_it(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [
        {"tool": "write_file", "args": {"path": "a.txt", "content": "v1"}},
        {"remember": {"phase": "first"}},
        {"tool": "write_file", "args": {"path": "a.txt", "content": "v2"}},
        {"tool": "write_file", "args": {"path": "b.txt", "content": "later"}},
        {"remember": {"phase": "second"}},
        {"finish": "done"},
    ]
    assert run_agent(tmp_path, store, capsys, "ag_rb", script) == 0
    assert workspace_file(tmp_path, "ag_rb", "a.txt").read_text() == "v2"
    before = trace(capsys, "ag_rb", store)
    version = steps_of(before)[2]["step_completed"]

    code, out, err = run_text(capsys, "rollback", "ag_rb", "--to", str(version), "--store", store)
    assert code == 0, err
    assert workspace_file(tmp_path, "ag_rb", "a.txt").read_text() == "v1"
    assert not workspace_file(tmp_path, "ag_rb", "b.txt").exists()
    assert "workspace put back: a.txt, b.txt" in out
    assert "compensated: nothing" in out and "stead resume ag_rb" in out

    after = trace(capsys, "ag_rb", store)
    assert after[: len(before)] == before  # nothing was deleted or rewritten
    assert after[-1]["kind"] == "rolled_back" and after[-1]["data"]["to_version"] == version
    code, shown = run_json(capsys, "show", "ag_rb", "--store", store)
    assert shown["status"] == "running" and shown["memory"] == {"phase": "first"}
    code, audit = run_json(capsys, "audit", "verify", "ag_rb", "--store", store)
    assert code == 0 and audit["ok"] is True


def test_rollback_refuses_a_version_in_the_middle_of_a_step(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_agent(tmp_path, store, capsys, "ag_mid", FLOW_SCRIPT) == 0
    events = trace(capsys, "ag_mid", store)
    middle = steps_of(events)[3]["intent"]
    code, _, err = run_text(capsys, "rollback", "ag_mid", "--to", str(middle), "--store", store)
    assert code == 2 and f"version {middle} is in the middle of step 3" in err
    code, _, err = run_text(capsys, "rollback", "ag_mid", "--to", "9999", "--store", store)
    assert code == 2 and f"has versions 1 to {len(events)}" in err
    assert trace(capsys, "ag_mid", store) == events  # nothing was journaled


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["certificate", "ag_missing"],
        ["check", "ag_missing"],
        ["lineage", "ag_missing", "3"],
        ["impact", "ag_missing", "3"],
        ["quarantine", "ag_missing", "3", "--reason", "bad"],
        ["rollback", "ag_missing", "--to", "3"],
        ["signoff", "ag_missing", "goal"],
    ],
)
def test_an_unknown_agent_exits_2_naming_it(
    store: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main(["ls", "--store", store]) == 2  # a read makes no store ...
    assert "no store at" in capsys.readouterr().err
    SqliteStore(store.removeprefix("sqlite:///")).close()  # ... so make one
    capsys.readouterr()
    code, out, err = run_text(capsys, *argv, "--store", store)
    assert code == 2 and out == ""
    assert "no agent with id ag_missing" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["lineage", "ag_ev", "9999"],
        ["impact", "ag_ev", "9999"],
        ["quarantine", "ag_ev", "9999", "--reason", "bad"],
        ["lineage", "ag_ev", "0"],
    ],
)
def test_an_unknown_event_exits_2_naming_it(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert run_agent(tmp_path, store, capsys, "ag_ev", FLOW_SCRIPT) == 0
    before = trace(capsys, "ag_ev", store)
    code, out, err = run_text(capsys, *argv, "--store", store)
    assert code == 2 and out == ""
    assert f"agent ag_ev has no event {argv[2]}" in err
    assert trace(capsys, "ag_ev", store) == before  # a refused quarantine journals nothing


def test_a_quarantine_without_a_reason_is_bad_usage(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_agent(tmp_path, store, capsys, "ag_r", FLOW_SCRIPT) == 0
    code, _, err = run_text(capsys, "quarantine", "ag_r", "8", "--reason", "  ", "--store", store)
    assert code == 2 and "a quarantine needs a reason" in err
    with pytest.raises(SystemExit) as exc:
        main(["quarantine", "ag_r", "8", "--store", store])
    assert exc.value.code == 2
