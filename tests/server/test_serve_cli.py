"""``stead token`` and ``stead serve`` as a person runs them: a real server process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from stead.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object]:
    code = main([*argv, "--json"])
    text = capsys.readouterr().out
    return code, json.loads(text) if text.strip() else None


def test_tokens_are_made_listed_revoked_and_refused_to_a_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    code, made = run_json(capsys, "token", "create", "--tenant", "acme", "--role", "approver",
                          "--name", "Ana", "--store", store)  # fmt: skip
    assert code == 0 and isinstance(made, dict)
    assert str(made["token"]).startswith(f"stead.{made['token_id']}.")
    code, listed = run_json(capsys, "token", "ls", "--store", store)
    assert listed == [{"token_id": made["token_id"], "tenant": "acme", "role": "approver",
                       "name": "Ana", "created_at": listed[0]["created_at"],  # type: ignore[index]
                       "revoked_at": None}]  # fmt: skip
    # the plain token is stored nowhere
    assert str(made["token"]).split(".")[2].encode() not in (tmp_path / "stead.db").read_bytes()
    assert main(["token", "revoke", str(made["token_id"]), "--store", store]) == 0
    assert main(["token", "revoke", str(made["token_id"]), "--store", store]) == 2
    capsys.readouterr()
    assert main(["token", "ls", "--tenant", "acme", "--store", store]) == 2
    assert "operator" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad_role:
        main(["token", "create", "--tenant", "acme", "--role", "root", "--store", store])
    assert bad_role.value.code == 2
    assert main(["token", "create", "--role", "viewer", "--store", store]) == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_stead_serve_answers_a_token_holder_and_refuses_a_revoked_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    _, viewer = run_json(capsys, "token", "create", "--tenant", "acme", "--role", "viewer",
                         "--store", store)  # fmt: skip
    assert isinstance(viewer, dict)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen(
        [sys.executable, "-m", "stead", "serve", "--store", store, "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{base}/v1/health", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
                time.sleep(0.1)
        auth = {"authorization": f"Bearer {viewer['token']}"}
        assert httpx.get(f"{base}/v1/agents", headers=auth).json() == []
        assert main(["token", "revoke", str(viewer["token_id"]), "--store", store]) == 0
        refused = httpx.get(f"{base}/v1/agents", headers=auth)
        assert refused.status_code == 401
        _, log = run_json(capsys, "token", "log", "--store", store)
        assert isinstance(log, list) and log[-1]["reason"] == "revoked"
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    assert proc.returncode == 0
