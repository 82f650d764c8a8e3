"""A real ``stead serve`` process over a store, for tests that need what only a real
server shows: uvicorn's own handling of headers and bodies, the server's memory, a
token revoked by another process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import IO

import httpx
import pytest

import stead
from stead.cli.main import main

SOURCE = Path(stead.__file__).resolve().parents[1]
"""The folder the stead under test is imported from: the server process imports the same."""
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(*argv: str) -> object:
    """``stead ARGV --json`` in this process; what it printed, as JSON."""
    printed = StringIO()
    with redirect_stdout(printed):
        code = main([*argv, "--json"])
    assert code == 0, (argv, printed.getvalue())
    text = printed.getvalue()
    return json.loads(text) if text.strip() else None


@dataclass
class Serving:
    base: str
    store: str
    proc: subprocess.Popen[bytes]

    def token(self, tenant: str = "acme", role: str = "viewer") -> tuple[str, str]:
        """A new token (plain, id) made as the operator makes one."""
        made = cli("token", "create", "--tenant", tenant, "--role", role, "--store", self.store)
        assert isinstance(made, dict)
        return str(made["token"]), str(made["token_id"])

    def revoke(self, token_id: str) -> None:
        assert main(["token", "revoke", token_id, "--store", self.store]) == 0

    def log(self) -> list[dict[str, object]]:
        found = cli("token", "log", "--store", self.store)
        assert isinstance(found, list)
        return found

    def rss(self, field: str = "VmHWM") -> int:
        """The server's resident memory in bytes (``VmHWM``: its peak so far)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field} for the server")


@contextmanager
def stead_serve(
    store: str, *args: str, data_dir: Path | None = None, extra: dict[str, str] | None = None
) -> Iterator[Serving]:
    """``stead serve --store STORE ARGS`` on a free port, until the block ends, with
    ``extra`` in its environment."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")} | (extra or {})
    env.pop("FORWARDED_ALLOW_IPS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(SOURCE), str(REPO)])
    argv = [sys.executable, "-m", "stead", "serve", "--store", store, "--port", str(port), *args]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    # a file, not a pipe: a pipe nobody reads would stop the server once full
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_for(base, proc, stderr)
            yield Serving(base, store, proc)
        finally:
            proc.terminate()
            try:
                proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def _wait_for(base: str, proc: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{base}/v1/health", timeout=1).raise_for_status()
            return
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stderr.seek(0)
                said = stderr.read().decode()
                raise AssertionError(f"stead serve did not start: {said}") from None
            time.sleep(0.1)


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Serving]:
    """A real server over a fresh SQLite store, with a spec folder holding ``waiter``
    (an agent that waits for input, then finishes)."""
    from .conftest import write_spec

    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "waiter", [{"wait_for_input": "go?"}, {"finish": "ok"}])
    with stead_serve(f"sqlite:///{tmp_path / 'stead.db'}", "--specs", str(specs)) as s:
        yield s
