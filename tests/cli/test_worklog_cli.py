"""``stead work`` logs each activation as it starts and ends, as text or JSON lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from stead import Runtime
from stead.cli.main import main
from stead.spec import load_spec
from stead.store.sqlite import SqliteStore

SRC = Path(__file__).resolve().parents[2] / "src"


def make_agents(tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    script = [
        {"tool": "write_file", "args": {"path": "a", "content": "A"}},
        {"remember": {"k": "v"}},
        {"finish": "done"},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump({"name": "logged", "model": "scripted:script.yaml", "tools": ["write_file"]})
    )
    ids = ["ag_log_one", "ag_log_two"]
    for agent_id in ids:  # one step each now: the worker runs the rest
        main(["run", str(spec), "--store", store, "--id", agent_id, "--max-steps", "1", "-q"])
    capsys.readouterr()
    return ids


@pytest.mark.parametrize("parked", [False, True])
def test_work_logs_each_activation_as_json_lines(
    tmp_path: Path, parked: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'db' / 's.db'}"
    ids = make_agents(tmp_path, store, capsys)
    extra = ["--in-flight", "4"] if parked else []
    assert main(["work", "--store", store, "--log-format", "json", *extra]) == 0
    err = capsys.readouterr().err
    entries = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    for agent_id in ids:
        mine = [e for e in entries if e["agent_id"] == agent_id]
        assert [e["event"] for e in mine] == ["start", "end"]
        end = mine[1]
        assert end["name"] == "logged" and end["status"] == "completed" and end["steps"] == 2
        assert end["at"].endswith("+00:00") and isinstance(end["tokens"], int)


def test_work_forever_logs_text_as_activations_happen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'db' / 's.db'}"
    ids = make_agents(tmp_path, store, capsys)
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "stead", "work", "--forever", "--poll", "0.2", "--store", store],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 30
        lines: list[str] = []
        assert worker.stderr is not None
        while sum(" end " in line for line in lines) < 2 and time.monotonic() < deadline:
            lines.append(worker.stderr.readline())  # printed while the worker still runs
        assert worker.poll() is None
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
    finally:
        worker.kill()
    for agent_id in ids:
        assert any(f"start {agent_id} (logged)" in line for line in lines)
        end = next(line for line in lines if f"end   {agent_id} (logged)" in line)
        assert "completed, 2 steps" in end and "tokens" in end


def test_an_activation_that_ends_first_is_logged_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A slow agent does not hold back the log of one that ended while it worked."""
    store = f"sqlite:///{tmp_path / 'db' / 's.db'}"
    for name, script in (
        ("a_slow", [{"tool": "shell", "args": {"command": "sleep 3"}}, {"finish": "slept"}]),
        ("b_quick", [{"remember": {"k": "v"}}, {"finish": "done"}]),
    ):
        (tmp_path / f"{name}.script.yaml").write_text(yaml.safe_dump(script))
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(yaml.safe_dump({"name": name, "model": f"scripted:{name}.script.yaml",
                                        "tools": ["shell"]}))  # fmt: skip
        rt = Runtime(SqliteStore(tmp_path / "db" / "s.db"), tmp_path / "db")
        rt.create(load_spec(spec), f"ag_{name}")  # made, not run: the worker runs both
        rt.close()
    assert main(["work", "--store", store, "--log-format", "json", "--concurrency", "2"]) == 0
    entries = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    ends = [e["agent_id"] for e in entries if e["event"] == "end"]
    assert ends == ["ag_b_quick", "ag_a_slow"]  # though the slow one came first
