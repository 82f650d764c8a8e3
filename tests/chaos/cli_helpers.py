"""Running the real ``stead`` command line in subprocesses, for the chaos tests."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .ledger_tools import LEDGER_ENV

REPO = Path(__file__).resolve().parents[2]
TOOLS_MODULE = "tests.chaos.ledger_tools"
LEDGER_TOOLS = (
    "append_plain",
    "append_reconciled",
    "append_idempotent",
    "slow_idempotent",
    "write_slowly",
)

EXIT_COMPLETED, EXIT_FAILED, EXIT_USAGE, EXIT_STOPPED, EXIT_BUSY = 0, 1, 2, 3, 4


class Cli:
    """One store, data folder and ledger; runs ``python -m stead`` against them."""

    def __init__(self, root: Path, **extra_env: str) -> None:
        self.root = root
        self.db = root / "db" / "stead.db"
        self.data_dir = root / "data"
        self.ledger = root / "outside" / "ledger.txt"
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        )
        env[LEDGER_ENV] = str(self.ledger)
        env.update(extra_env)
        self.env = env

    @property
    def url(self) -> str:
        return f"sqlite:///{self.db}"

    def argv(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "stead",
            *args,
            "--store",
            self.url,
            "--data-dir",
            str(self.data_dir),
        ]

    def popen(self, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        argv = self.argv(*args)
        if prefix:  # run the CLI through a launcher instead of ``-m stead``
            argv = [sys.executable, *prefix, *argv[3:]]
        return subprocess.Popen(
            argv,
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def standby(self, *args: str) -> subprocess.Popen[bytes]:
        """``stead args...`` with Python and stead imported ahead, started by :func:`go`.

        On a loaded machine a fresh process spends seconds importing; a test that
        replaces each killed worker at once starts the replacement's imports early.
        """
        return subprocess.Popen(
            [sys.executable, "-c", _STANDBY, *self.argv(*args)[3:]],
            cwd=self.root,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def show(self, agent_id: str) -> dict[str, Any]:
        proc = self.run("show", agent_id, "--json")
        assert proc.returncode == 0, proc.stderr
        state: dict[str, Any] = json.loads(proc.stdout)
        return state

    def trace(self, agent_id: str) -> list[dict[str, Any]]:
        proc = self.run("trace", agent_id, "--json")
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def ledger_lines(self) -> list[str]:
        if not self.ledger.exists():
            return []
        return self.ledger.read_text(encoding="utf-8").splitlines()

    def workspace(self, agent_id: str, tenant: str = "default") -> Path:
        return self.data_dir / "workspaces" / tenant / agent_id


_STANDBY = (
    "import sys; from stead.cli.main import main; sys.stdin.readline(); "
    "sys.exit(main(sys.argv[1:]))"
)


def go(standby: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """Let a process from :meth:`Cli.standby` run its command (at once, if its imports
    are done); it is returned."""
    assert standby.stdin is not None
    standby.stdin.write(b"go\n")
    standby.stdin.flush()
    return standby


def write_spec(folder: Path, script: list[Any], name: str = "chaos", **spec: Any) -> Path:
    """Write ``script.yaml`` and ``spec.yaml`` (with the ledger tools) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {
        "name": name,
        "model": "scripted:script.yaml",
        "tools": ["write_file", *(f"{TOOLS_MODULE}:{t}" for t in LEDGER_TOOLS)],
        **spec,
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def files_on_disk(root: Path) -> dict[str, str]:
    """Every regular file under ``root`` (relative path with ``/``) and its SHA-256."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            rel = path.relative_to(root).as_posix()
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
