"""``stead upgrade``, run in-process on a SQLite store: plan, apply, history, rollback,
refusals and a canary over every agent of a spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead.cli.main import main


def write(tmp_path: Path, name: str, **spec: Any) -> str:
    data = {"name": "helper", "model": "scripted:script.yaml", "instructions": "Help.",
            "tools": ["read_file"], **spec}  # fmt: skip
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


@pytest.fixture
def store(tmp_path: Path) -> list[str]:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"wait_for_input": "more?"}] * 5))
    return ["--store", f"sqlite:///{tmp_path / 'db' / 'stead.db'}"]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def agent(tmp_path: Path, store: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, made = run_json(capsys, "run", write(tmp_path, "v1.yaml"), *store)
    assert code == 3  # waiting for input
    return str(made["agent_id"])


def test_plan_apply_history_and_rollback(
    tmp_path: Path, store: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    agent_id = agent(tmp_path, store, capsys)
    v2 = write(tmp_path, "v2.yaml", instructions="Help, briefly.")
    code, plan = run_json(capsys, "upgrade", agent_id, "--new", v2, "--dry-run", *store)
    assert code == 0 and not plan["applied"]
    assert plan["changes"] == [{"field": "instructions", "before": "Help.",
                                "after": "Help, briefly."}]  # fmt: skip
    code, done = run_json(capsys, "upgrade", agent_id, "--new", v2, "--reason", "brevity", *store)
    assert code == 0 and done["applied"] and done["to"] != done["from"]
    code, rows = run_json(capsys, "upgrade", agent_id, "--history", *store)
    assert [(r["kind"], r["reason"]) for r in rows] == [("agent_created", ""),
                                                        ("upgrade", "brevity")]  # fmt: skip
    assert rows[1]["digest"] == done["to"] and rows[0]["digest"] == done["from"]
    code, back = run_json(capsys, "upgrade", agent_id, "--rollback", *store)
    assert code == 0 and back["to"] == done["from"]
    code, rows = run_json(capsys, "upgrade", agent_id, "--history", *store)
    assert [r["kind"] for r in rows] == ["agent_created", "upgrade", "rollback"]
    # and the agent runs on the spec it was put back to
    assert main(["send", agent_id, "again", *store]) in (0, 3)


def test_a_refusal_is_one_line_and_exit_2(
    tmp_path: Path, store: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["upgrade", "--new", write(tmp_path, "v2.yaml"), *store])
    assert code == 2 and "name one agent" in capsys.readouterr().err


def test_every_agent_of_a_spec_with_a_canary(
    tmp_path: Path, store: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    ids = sorted(agent(tmp_path, store, capsys) for _ in range(3))
    v2 = write(tmp_path, "v2.yaml", instructions="v2")
    code, report = run_json(capsys, "upgrade", "--spec", "helper", "--new", v2,
                            "--canary", "1", "--watch", "1s", *store)  # fmt: skip
    assert code == 0 and report["outcome"] == "applied"
    assert report["canaries"] == ids[:1] and report["rest"] == ids[1:]
    code, plans = run_json(capsys, "upgrade", "--spec", "helper", "--new", v2, "--dry-run",
                           *store)  # fmt: skip
    assert [p["changes"] for p in plans] == [[], [], []]


def test_a_provider_s_model_is_asked_with_the_upgraded_spec(
    tmp_path: Path,
    store: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ..models.fake_servers import FakeServer, Reply, calls_in, openai_answer, openai_call

    monkeypatch.setenv("LOCAL_MODEL_KEY", "sk-local-0123456789")
    monkeypatch.setenv("STEAD_MODEL_KEY_ENV", "LOCAL_MODEL_KEY")  # the operator allows it
    ask = Reply(200, openai_answer([openai_call("c1", "wait_for_input", {"prompt": "more?"})]))
    with FakeServer() as fake:
        fake.default = ask
        model = {"provider": "openai", "name": "m-1", "base_url": fake.url,
                 "api_key_secret": "LOCAL_MODEL_KEY"}  # fmt: skip
        code, made = run_json(capsys, "run", write(tmp_path, "v1.yaml", model=model), *store)
        assert code == 3, made
        assert "Help." in str(fake.seen[-1].body["messages"][0]["content"])
        v2 = write(tmp_path, "v2.yaml", model=model, instructions="Help in French.",
                   tools=["read_file", "list_files"])  # fmt: skip
        code, done = run_json(capsys, "upgrade", made["agent_id"], "--new", v2, *store)
        assert code == 0 and done["added_tools"] == ["list_files"], done
        assert main(["send", made["agent_id"], "bonjour", *store]) == 3
        last = fake.seen[-1].body
        assert "Help in French." in str(last["messages"][0]["content"])
        assert "list_files" in set(calls_in(last))
