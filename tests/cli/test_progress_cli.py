"""What a person sees in a terminal: ``stead run`` step by step, ``stead trace``'s
details and ``--follow``, ``stead ls`` at 80 columns, ``stead show``'s goals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stead.cli.main import main
from tests.models.fake_servers import (
    FakeServer,
    Reply,
    anthropic_answer,
    anthropic_text,
    anthropic_use,
    openai_answer,
    openai_call,
)
from tests.postgres import fresh_schema, url_for

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture(autouse=True)
def columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def answer(provider: str, text: str | None, *calls: tuple[str, Any]) -> Reply:
    if provider == "openai":
        made = [openai_call(f"call_{i}", n, a) for i, (n, a) in enumerate(calls)]
        return Reply(200, openai_answer(made, text, prompt_tokens=1200, completion_tokens=34))
    blocks = [anthropic_text(text)] if text else []
    blocks += [anthropic_use(f"toolu_{i}", n, a) for i, (n, a) in enumerate(calls)]
    return Reply(200, anthropic_answer(blocks, input_tokens=1200, output_tokens=34))


def provider_spec(tmp_path: Path, provider: str, url: str) -> Path:
    data = {
        "name": "writer",
        "instructions": "Write notes.txt, then finish.",
        "model": {"provider": provider, "name": "m-1", "base_url": url},
        "tools": ["write_file", "read_file"],
        "on_text": "refuse",  # a text answer is refused, saying why
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def scripted_spec(tmp_path: Path, script: list[Any]) -> Path:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {"name": "s", "model": "scripted:script.yaml", "tools": ["write_file", "read_file"]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_run_prints_each_step_as_it_happens_and_trace_shows_the_details(
    tmp_path: Path,
    server: FakeServer,
    provider: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(f"{provider.upper()}_API_KEY", "sk-test-0123456789")
    monkeypatch.setenv("STEAD_MODEL_KEY_ENV", f"{provider.upper()}_API_KEY")  # to 127.0.0.1
    store = f"sqlite:///{tmp_path / 'db' / 's.db'}"
    long_text = "line of notes " * 200
    server.queue(
        answer(
            provider,
            "I will write the notes first.",
            ("write_file", {"path": "notes.txt", "content": long_text}),
        ),
        answer(provider, "Just talking, no call."),
        answer(provider, None, ("read_file", {"path": "notes.txt"})),
        answer(provider, None, ("finish", {"summary": "notes written"})),
    )
    spec = provider_spec(tmp_path, provider, server.url)
    assert main(["run", str(spec), "--id", "ag_writer", "--store", store]) == 0
    got = capsys.readouterr()
    lines = got.err.splitlines()
    first = next(line for line in lines if line.startswith("step 1"))
    assert "step 1: I will write the notes first." in first  # streamed as it was written
    assert "1,234 tokens (1,200 in, 34 out)" in first and "$" in first
    call = next(line for line in lines if "→ write_file(" in line)
    assert 'path="notes.txt", content="line of notes' in call and "…" in call and len(call) < 110
    assert any(line.startswith("  ← write_file ok") for line in lines)
    assert any("answer refused" in line and "step 2" in line for line in lines)
    read = next(line for line in lines if "← read_file ok" in line)
    assert "line of notes" in read and read.endswith("…") and len(read) < 130
    assert "ran " in got.out and "completed" in got.out

    assert main(["trace", "ag_writer", "--store", store]) == 0
    text = capsys.readouterr().out
    assert "1,234 tokens" in text  # tokens per decision
    assert "line of notes" in text  # a tool's output, clipped
    refused = text[text.index("answer_refused") :].split("\n")[0]
    assert "step 2" in refused and "called no tool" in refused


def test_quiet_and_json_print_no_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = f"sqlite:///{tmp_path / 'db' / 's.db'}"
    spec = scripted_spec(
        tmp_path, [{"tool": "write_file", "args": {"path": "a", "content": "A"}}, {"finish": "ok"}]
    )
    assert main(["run", str(spec), "--store", store, "--quiet"]) == 0
    got = capsys.readouterr()
    assert "write_file" not in got.err and "ran 2 step(s)" in got.out
    assert main(["run", str(spec), "--store", store, "--json"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["status"] == "completed" and "step 1" not in got.err
    assert main(["run", str(spec), "--store", store]) == 0
    got = capsys.readouterr()
    assert "step 1" in got.err and '→ write_file(content="A", path="a")' in got.err


def test_what_a_tool_wrote_is_shown_escaped_never_obeyed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'db' / 's.db'}"
    hostile = "\x1b[2J[red]cleared[/red]\u202eexe.txt"
    spec = scripted_spec(
        tmp_path,
        [
            {"tool": "write_file", "args": {"path": "a", "content": hostile}},
            {"tool": "read_file", "args": {"path": "a"}},
            {"finish": "ok"},
        ],
    )
    assert main(["run", str(spec), "--store", store, "--id", "ag_esc"]) == 0
    run_err = capsys.readouterr().err
    assert main(["trace", "ag_esc", "--store", store]) == 0
    trace_out = capsys.readouterr().out
    for text in (run_err, trace_out):
        assert "\x1b" not in text and "\u202e" not in text
        assert "\\x1b[2J[red]cleared[/red]\\u202e" in text  # as written, escaped


def test_ls_never_cuts_an_agent_id_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'db' / 's.db'}"
    spec = scripted_spec(tmp_path, [{"finish": "ok"}])
    data = yaml.safe_load(spec.read_text())
    spec.write_text(yaml.safe_dump({**data, "name": "a-rather-long-agent-name-here"}))
    for _ in range(2):
        assert main(["run", str(spec), "--store", store, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["ls", "--store", store, "--json"]) == 0
    ids = [a["agent_id"] for a in json.loads(capsys.readouterr().out)]
    assert main(["ls", "--store", store]) == 0
    text = capsys.readouterr().out
    assert all(len(line) <= 80 for line in text.splitlines())
    for agent_id in ids:
        assert agent_id in text  # whole, on one line: copyable


def test_show_lists_goals_with_their_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'db' / 's.db'}"
    spec = scripted_spec(
        tmp_path,
        [
            {"push_goal": {"id": "one", "description": "the first"}},
            {"push_goal": {"id": "two", "description": "the second"}},
            {"complete_goal": "one"},
            {"wait_for_input": "more?"},
        ],
    )
    main(["run", str(spec), "--store", store, "--id", "ag_goals", "--quiet"])
    capsys.readouterr()
    assert main(["show", "ag_goals", "--store", store]) == 0
    text = capsys.readouterr().out
    assert "goals (1 of 2 completed):" in text
    assert "[completed] one: the first" in text and "[open] two: the second" in text


def _stores() -> list[str]:
    return ["sqlite", "postgres"]


@pytest.mark.parametrize("backend", _stores())
def test_trace_follow_prints_events_as_they_are_committed_until_the_agent_ends(
    tmp_path: Path,
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("STEAD_DATA_DIR", str(tmp_path / "data"))
    with _store_url(tmp_path, backend) as store:
        spec = scripted_spec(
            tmp_path,
            [{"tool": "write_file", "args": {"path": "a", "content": "A"}}, {"finish": "done"}],
        )
        # made, not run: the follower starts before the work does
        assert main(["run", str(spec), "--store", store, "--id", "ag_f", "--max-steps", "1",
                     "--quiet"]) == 3  # fmt: skip
        capsys.readouterr()
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        follower = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stead",
                "trace",
                "ag_f",
                "--follow",
                "--json",
                "--store",
                store,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        try:
            time.sleep(1.5)  # it has printed what there was and is waiting
            assert follower.poll() is None
            assert main(["resume", "ag_f", "--store", store, "--quiet"]) == 0
            out, err = follower.communicate(timeout=30)
        finally:
            follower.kill()
        assert follower.returncode == 0, err
        events = [json.loads(line) for line in out.splitlines()]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert any(e["kind"] == "finish_claimed" for e in events)
        assert sum(e["kind"] == "activation_started" for e in events) == 2


class _store_url:
    def __init__(self, tmp_path: Path, backend: str) -> None:
        self.tmp_path, self.backend = tmp_path, backend
        self._schema: Any = None

    def __enter__(self) -> str:
        if self.backend == "sqlite":
            return f"sqlite:///{self.tmp_path / 'db' / 's.db'}"
        self._schema = fresh_schema()
        return url_for(self._schema.__enter__())

    def __exit__(self, *exc: Any) -> None:
        if self._schema is not None:
            self._schema.__exit__(*exc)
