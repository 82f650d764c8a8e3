"""The secrets vault: encrypted at rest, scoped, injected per call, redacted everywhere."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead import Runtime, parse_spec
from stead.cli.main import main
from stead.errors import SecretError
from stead.runtime.context import render
from stead.sandbox.secrets import Vault, load_key, new_key, redact
from stead.store.sqlite import SqliteStore

SECRET = "s3cr3t-Value-9f2c"
KEY = base64.b64decode(new_key())


def test_values_are_sealed_scoped_and_bound_to_their_row(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    vault = Vault(store, KEY)
    vault.set("acme", "TOKEN", "tenant-wide", at=1.0)
    vault.set("acme", "TOKEN", "agent-own", agent_id="ag_1", at=1.0)
    assert vault.get("acme", "ag_1", "TOKEN") == "agent-own"
    assert vault.get("acme", "ag_2", "TOKEN") == "tenant-wide"
    assert vault.get("other", "ag_1", "TOKEN") is None
    assert store.list_secrets("acme") == [("", "TOKEN", 1.0), ("ag_1", "TOKEN", 1.0)]
    with pytest.raises(SecretError, match="does not open"):
        Vault(store, base64.b64decode(new_key())).get("acme", "ag_2", "TOKEN")
    # a sealed value moved to another row does not open there
    store.put_secret("acme", "", "OTHER", store.get_secret("acme", "", "TOKEN") or "", 2.0)
    with pytest.raises(SecretError, match="does not open"):
        vault.get("acme", "ag_2", "OTHER")
    store.close()
    assert b"tenant-wide" not in (tmp_path / "s.db").read_bytes()
    assert b"agent-own" not in (tmp_path / "s.db").read_bytes()


def test_the_key_comes_from_the_environment_or_a_file(tmp_path: Path) -> None:
    key = new_key()
    assert load_key({"STEAD_SECRET_KEY": key}) == base64.b64decode(key)
    (tmp_path / "k").write_text(key + "\n")
    assert load_key({"STEAD_SECRET_KEY_FILE": str(tmp_path / "k")}) == base64.b64decode(key)
    with pytest.raises(SecretError, match="stead secret keygen"):
        load_key({})
    with pytest.raises(SecretError, match="not base64 of 32 bytes"):
        load_key({"STEAD_SECRET_KEY": "short"})


def test_redact_replaces_every_occurrence_even_inside_json_escapes() -> None:
    tricky = 'a"b\\c'
    value = {"x": [f"pre {tricky} post", {"k": tricky}], "n": 1}
    assert redact(value, {"T": tricky}) == {
        "x": ["pre [secret:T] post", {"k": "[secret:T]"}],
        "n": 1,
    }


MOD = "tests.sandbox.secret_tools"


def acme_spec(tmp_path: Path, script: list[Any], tools: list[str]) -> Any:
    """The spec of a scripted agent of tenant acme with these tools."""
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    data = {"name": "s", "tenant": "acme", "model": "scripted:script.yaml", "tools": tools}
    return parse_spec(data, tmp_path)


@pytest.fixture
def agent(tmp_path: Path) -> tuple[Runtime, str]:
    script = [
        {"tool": "echo_token"},
        {"tool": "fail_with_token"},
        {"tool": "undeclared"},
        {"finish": "done"},
    ]
    spec = acme_spec(
        tmp_path, script, [f"{MOD}:echo_token", f"{MOD}:fail_with_token", f"{MOD}:undeclared"]
    )
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=KEY)
    agent_id = rt.create(spec).agent_id
    return rt, agent_id


def test_a_secret_reaches_only_its_tool_and_is_recorded_nowhere(
    agent: tuple[Runtime, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt, agent_id = agent
    rt.vault().set("acme", "TOKEN", SECRET, at=1.0)
    state = rt.run(agent_id).state
    assert state.status == "completed"
    echoed, failed, undeclared = state.recent_calls
    assert echoed["output"] == {"token": "[secret:TOKEN]", "said": "the token is [secret:TOKEN]!"}
    assert failed["error"] == "RuntimeError: could not log in with [secret:TOKEN]"
    assert undeclared["output"] == {"secrets": {}}, "undeclared tools get no secrets"
    record = rt.store.get_record(agent_id)
    context = render(state, record.spec, rt.tools_for(record)).text
    journal = json.dumps([e.to_json() for e in rt.store.read_events(agent_id)])
    rt.close()
    assert (
        main(
            [
                "trace",
                agent_id,
                "--json",
                "--store",
                f"sqlite:///{tmp_path / 's.db'}",
                "--data-dir",
                str(tmp_path / "data"),
            ]
        )
        == 0
    )
    trace = capsys.readouterr().out
    for where, text in (("context", context), ("journal", journal), ("trace", trace)):
        assert SECRET not in text, where
        assert "[secret:TOKEN]" in text, where
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert SECRET.encode() not in raw


def test_a_secret_one_tool_saved_is_hidden_when_another_tool_reads_it(tmp_path: Path) -> None:
    """Redaction covers every secret the agent's tools may get, not the caller's only.

    The tool that read the file was given no secret; its output still never
    records the value. (The file itself, and its blob, hold what was written.)
    """
    script = [
        {"tool": "save_token"},
        {"tool": "read_file", "args": {"path": "token.txt"}},
        {"finish": "done"},
    ]
    spec = acme_spec(tmp_path, script, [f"{MOD}:save_token", "read_file"])
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=KEY)
    agent_id = rt.create(spec).agent_id
    rt.vault().set("acme", "TOKEN", SECRET, at=1.0)
    rt.run(agent_id, max_steps=1)
    rt.close()
    # the read happens in a later activation, which never opened the secret for a call
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=KEY)
    state = rt.run(agent_id).state
    assert state.status == "completed"
    read = [c for c in state.recent_calls if c["tool"] == "read_file"]
    assert read and read[0]["output"] == "token=[secret:TOKEN]\n"
    record = rt.store.get_record(agent_id)
    context = render(state, record.spec, rt.tools_for(record)).text
    journal = json.dumps([e.to_json() for e in rt.store.read_events(agent_id)])
    rt.close()
    assert SECRET not in context and SECRET not in journal
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert SECRET.encode() not in raw


def test_redaction_keeps_numbers_whole_and_hides_a_secret_spelled_by_one() -> None:
    value = {"bytes": 4821, "size": 14821, "path": "a/4821.txt", "ok": True, "none": None}
    assert redact(value, {"PIN": "4821"}) == {
        "bytes": "[secret:PIN]",
        "size": "1[secret:PIN]",
        "path": "a/[secret:PIN].txt",
        "ok": True,
        "none": None,
    }
    assert redact({"n": 7}, {"PIN": "4821"}) == {"n": 7}


def test_a_secret_sealed_under_another_key_does_not_break_other_tools(tmp_path: Path) -> None:
    """After a key rotation, a secret the vault cannot open is nothing to hide:
    the calls of tools that need no secret still record their results."""
    script = [
        {"tool": "write_file", "args": {"path": "a.txt", "content": "hello"}},
        {"finish": "ok"},
    ]
    spec = acme_spec(tmp_path, script, [f"{MOD}:echo_token", "write_file"])
    other = Runtime(
        SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=base64.b64decode(new_key())
    )
    other.vault().set("acme", "TOKEN", SECRET, at=1.0)
    other.close()
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=KEY)
    agent_id = rt.create(spec).agent_id
    state = rt.run(agent_id).state
    assert state.status == "completed"
    (wrote,) = state.recent_calls
    assert wrote["ok"] and wrote["tool"] == "write_file"
    rt.close()


def test_a_missing_secret_stops_the_agent_until_a_person_sets_it(
    agent: tuple[Runtime, str],
) -> None:
    """Not the model's mistake: the call fails with what to do, and the agent waits
    in needs_attention instead of going on (or finishing) without the secret."""
    rt, agent_id = agent
    state = rt.run(agent_id).state
    assert "needs secret TOKEN" in state.recent_calls[0]["error"]
    assert "stead secret set TOKEN" in state.recent_calls[0]["error"]
    assert state.status == "needs_attention" and len(state.recent_calls) == 1
    assert "could not be given its secrets" in state.status_reason
    assert f"stead resume {agent_id}" in state.status_reason
    rt.vault().set("acme", "TOKEN", SECRET, at=2.0)
    state = rt.run(agent_id).state  # a resume: the model sees the failure and goes on
    assert state.status == "completed"
    assert [c["tool"] for c in state.recent_calls] == [
        "echo_token", "fail_with_token", "undeclared"
    ]  # fmt: skip
    rt.close()


def test_the_secret_cli_reads_values_from_stdin_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    store = ["--store", f"sqlite:///{tmp_path / 's.db'}"]
    monkeypatch.delenv("STEAD_SECRET_KEY", raising=False)
    monkeypatch.delenv("STEAD_SECRET_KEY_FILE", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    assert main(["secret", "set", "TOKEN", *store]) == 2
    assert "stead secret keygen" in capsys.readouterr().err

    assert main(["secret", "keygen"]) == 0
    monkeypatch.setenv("STEAD_SECRET_KEY", capsys.readouterr().out.strip())
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    assert main(["secret", "set", "TOKEN", "--tenant", "acme", *store]) == 0
    assert main(["secret", "ls", "--tenant", "acme", *store]) == 0
    listed = capsys.readouterr().out
    assert "TOKEN" in listed and SECRET not in listed
    check = SqliteStore(tmp_path / "s.db")
    assert Vault(check, load_key()).get("acme", "x", "TOKEN") == SECRET
    check.close()
    assert main(["secret", "rm", "TOKEN", "--tenant", "acme", *store]) == 0
    assert main(["secret", "rm", "TOKEN", "--tenant", "acme", *store]) == 2
    assert main(["secret", "set", "bad name", *store]) == 2
    with sqlite3.connect(tmp_path / "s.db") as con:
        assert con.execute("SELECT COUNT(*) FROM secrets").fetchone() == (0,)
    assert os.environ.get("STEAD_SECRET_KEY")


def test_shell_gets_the_secrets_its_spec_entry_grants_and_echoes_are_redacted(
    tmp_path: Path,
) -> None:
    script = [
        {"tool": "shell", "args": {"command": 'echo "token=$TOKEN"; env | grep -c OTHER'}},
        {"finish": "done"},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    spec = parse_spec(
        {
            "name": "s",
            "model": "scripted:script.yaml",
            "tools": [{"tool": "shell", "secrets": ["TOKEN"]}],
        },
        tmp_path,
    )
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=KEY)
    rt.vault().set("default", "TOKEN", SECRET, at=1.0)
    rt.vault().set("default", "OTHER", "not-for-shell", at=1.0)
    agent_id = rt.create(spec).agent_id
    state = rt.run(agent_id).state
    out = state.recent_calls[0]["output"]["stdout"]
    assert out.splitlines() == ["token=[secret:TOKEN]", "0"]
    assert SECRET not in json.dumps([e.to_json() for e in rt.store.read_events(agent_id)])
    rt.close()


def test_shell_sees_only_the_worker_variables_its_entry_declares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEAD_TEST_VISIBLE", "yes")
    monkeypatch.setenv("STEAD_TEST_HIDDEN", "no")
    script = [
        {"tool": "shell", "args": {"command": "env | grep STEAD_TEST_ | sort"}},
        {"finish": "done"},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    spec = parse_spec(
        {
            "name": "e",
            "model": "scripted:script.yaml",
            "tools": [{"tool": "shell", "env": ["STEAD_TEST_VISIBLE"]}],
        },
        tmp_path,
    )
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data")
    state = rt.run(rt.create(spec).agent_id).state
    assert state.recent_calls[0]["output"]["stdout"].splitlines() == ["STEAD_TEST_VISIBLE=yes"]
    rt.close()


def test_a_python_tool_runs_its_process_in_the_sandbox_with_its_secret(tmp_path: Path) -> None:
    script = [{"tool": "run_with_token"}, {"finish": "done"}]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    spec = parse_spec(
        {
            "name": "p",
            "model": "scripted:script.yaml",
            "tools": [f"{MOD}:run_with_token"],
        },
        tmp_path,
    )
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", secret_key=KEY)
    rt.vault().set("default", "TOKEN", SECRET, at=1.0)
    agent_id = rt.create(spec).agent_id
    state = rt.run(agent_id).state
    assert state.recent_calls[0]["output"]["stdout"].split() == ["/workspace", "stead"]
    used = rt.workspace(agent_id, "default").root / "used.txt"
    assert used.read_text() == SECRET, "the process got the secret it was granted"
    rt.close()


# -- where a secret may be sent (issue 26) -------------------------------------------------


def test_a_secret_s_hosts_are_sealed_with_it_and_a_database_writer_cannot_widen_them(
    tmp_path: Path,
) -> None:
    from stead.destinations import Bound, check_destination

    store = SqliteStore(tmp_path / "s.db")
    vault = Vault(store, KEY)
    vault.set("acme", "GH", SECRET, to=["api.github.com", "*.example.com"], at=1.0)
    assert vault.find("acme", "", "GH") == Bound(SECRET, ("api.github.com", "*.example.com"))
    assert vault.get("acme", "", "GH") == SECRET
    row = store.get_secret("acme", "", "GH") or ""
    assert row.startswith("v2:") and "github" not in row
    # the mark taken off (an unbound secret goes to a provider), or the row changed: no opening
    for forged in (row.removeprefix("v2:"), row[:-4] + ("AAAA" if row[-4:] != "AAAA" else "BBBB")):
        store.put_secret("acme", "", "GH", forged, 2.0)
        with pytest.raises(SecretError, match="does not open"):
            vault.find("acme", "", "GH")
    found = Bound(SECRET, ("api.github.com", "*.example.com"))
    assert check_destination("GH", found, "https://api.github.com/x", "a test") == SECRET
    assert check_destination("GH", found, "https://a.b.example.com/", "a test") == SECRET
    for elsewhere in ("https://example.com/", "https://api.github.com.evil.io/",
                      "https://evilexample.com/", "http://127.0.0.1:9/"):  # fmt: skip
        with pytest.raises(SecretError, match="may not be sent to") as caught:
            check_destination("GH", found, elsewhere, "a test")
        assert "stead secret set GH --to" in str(caught.value)
    # unbound: only the default host, and none where there is no default
    assert check_destination("K", Bound(SECRET), "https://api.openai.com/v1", "m",
                             "api.openai.com") == SECRET  # fmt: skip
    with pytest.raises(SecretError, match="bound to no host"):
        check_destination("K", Bound(SECRET), "https://mcp.example.com/", "m")
    for bad in (["https://x.io/"], ["x.io:443"], ["*"], ["a b"], []):
        with pytest.raises(SecretError, match="host"):
            vault.set("acme", "GH", SECRET, to=bad, at=3.0)
    store.close()


def test_secret_set_binds_to_hosts_or_a_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    store = ["--store", f"sqlite:///{tmp_path / 's.db'}"]
    monkeypatch.setenv("STEAD_SECRET_KEY", new_key())
    monkeypatch.delenv("STEAD_SECRET_KEY_FILE", raising=False)
    bindings = [(["--to", "API.GitHub.com,*.corp.io"], ("api.github.com", "*.corp.io")),
                (["--provider", "anthropic"], ("api.anthropic.com",)), ([], None)]  # fmt: skip
    for args, to in bindings:
        monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
        assert main(["secret", "set", "TOKEN", *args, *store]) == 0
        check = SqliteStore(tmp_path / "s.db")
        found = Vault(check, load_key()).find("default", "", "TOKEN")
        check.close()
        assert found is not None and found.to == to
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    assert main(["secret", "set", "GH", "--to", "api.github.com", *store]) == 0
    capsys.readouterr()
    assert main(["secret", "ls", *store]) == 0
    listed = capsys.readouterr().out
    assert "GH  (tenant default; sent only to api.github.com)" in listed
    assert "TOKEN  (tenant default; bound to no host)" in listed and SECRET not in listed
    monkeypatch.delenv("STEAD_SECRET_KEY")  # without the key, nothing is said of the hosts
    assert main(["secret", "ls", "--json", *store]) == 0
    assert all("to" not in row for row in json.loads(capsys.readouterr().out))
    monkeypatch.setenv("STEAD_SECRET_KEY", new_key())  # another key: nothing said either
    assert main(["secret", "ls", *store]) == 0
    assert "GH  (tenant default)" in capsys.readouterr().out
    for args in (["--to", "https://x.io/"], ["--to", "a,"]):
        monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
        assert main(["secret", "set", "TOKEN", *args, *store]) == 2
        assert "is not a host" in capsys.readouterr().err
    for args in (["--provider", "x"], ["--to", "a.io", "--provider", "openai"]):
        with pytest.raises(SystemExit) as exited:
            main(["secret", "set", "TOKEN", *args, *store])
        assert exited.value.code == 2
