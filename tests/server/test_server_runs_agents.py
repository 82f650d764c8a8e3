"""``stead serve`` runs its store's agents itself: an approval, a message or a new
agent made over HTTP goes on with nothing else started; ``--workers 0`` runs none,
and an agent left with work is then shown ``queued``, never ``running``."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from stead.cli.main import main
from stead.sandbox.secrets import new_key
from tests.waiting import until

from ..models.fake_servers import FakeServer, Reply, openai_answer, openai_call
from ..postgres import fresh_schema, url_for
from .conftest import write_spec
from .process import Serving, stead_serve


def _call(s: Serving, token: str, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, s.base + path, headers={"authorization": f"Bearer {token}"},
                         timeout=30, **kw)  # fmt: skip


def _status(s: Serving, token: str, agent_id: str) -> str:
    got = _call(s, token, "GET", f"/v1/agents/{agent_id}")
    assert got.status_code == 200, got.text
    return str(got.json()["status"])


@contextmanager
def _store(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'stead.db'}"
    else:
        with fresh_schema() as schema:
            yield url_for(schema)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_agent_made_over_http_with_a_provider_model_runs_and_goes_on_after_approval(
    tmp_path: Path, backend: str
) -> None:
    key = {"STEAD_SECRET_KEY": new_key()}
    with (
        _store(backend, tmp_path) as store,
        FakeServer() as model,
        stead_serve(store, data_dir=tmp_path / "data", extra=key) as s,
    ):
        admin, _ = s.token(role="admin")
        model.queue(
            Reply(200, openai_answer([openai_call("c1", "write_file",
                                                  {"path": "note.txt", "content": "hi"})])),
            Reply(200, openai_answer([openai_call("c2", "finish", {"summary": "wrote it"})])),
        )  # fmt: skip
        policy = f'@model_base_url("{model.url}")\npermit(principal, action, resource);\n'
        assert _call(s, admin, "PUT", "/v1/policy", json={"text": policy}).status_code == 200
        put = _call(s, admin, "PUT", "/v1/secrets/OPENAI_API_KEY",
                    json={"value": "sk-test-0123456789", "to": ["127.0.0.1"]})  # fmt: skip
        assert put.status_code == 204, put.text
        spec = {"name": "noter", "instructions": "Write note.txt, then finish.",
                "autonomy": "act_with_approval", "tools": ["write_file"],
                "model": {"provider": "openai", "name": "gpt-4o-mini", "base_url": model.url,
                          "max_retries": 0}}  # fmt: skip
        made = _call(s, admin, "POST", "/v1/agents", json={"spec": spec})
        assert made.status_code == 201, made.text
        agent_id = made.json()["agent_id"]
        # nobody runs it but the server: it asks the model, then waits for a person
        pending = until(lambda: _call(s, admin, "GET", "/v1/approvals").json())
        assert [p["agent_id"] for p in pending] == [agent_id]
        assert _status(s, admin, agent_id) == "waiting"
        approved = _call(s, admin, "POST", f"/v1/approvals/{pending[0]['approval_id']}/approve",
                         json={})  # fmt: skip
        assert approved.status_code == 200, approved.text
        until(lambda: _status(s, admin, agent_id) == "completed")
        assert len(model.seen) == 2 and model.seen[0].headers["authorization"].endswith("6789")


def test_a_server_with_no_workers_shows_work_nobody_runs_as_queued(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "waiter", [{"wait_for_input": "go?"}, {"finish": "ok"}])
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    with stead_serve(store, "--specs", str(specs), "--workers", "0") as s:
        operator, _ = s.token(role="operator")
        made = _call(s, operator, "POST", "/v1/agents", json={"spec_file": "waiter.yaml"})
        agent_id = made.json()["agent_id"]
        time.sleep(1.5)  # a server's own worker would have run it by now
        assert _status(s, operator, agent_id) == "created"
        assert main(["work", "--store", store]) == 0
        assert _status(s, operator, agent_id) == "waiting"
        sent = _call(s, operator, "POST", f"/v1/agents/{agent_id}/messages", json={"text": "go"})
        assert sent.status_code == 200, sent.text
        # the journal says it has work; nothing holds it: a person is told so
        assert sent.json()["status"] == "running"
        assert _status(s, operator, agent_id) == "queued"
        listed = _call(s, operator, "GET", "/v1/agents", params={"status": "queued"}).json()
        assert [a["agent_id"] for a in listed] == [agent_id]
        assert main(["work", "--store", store]) == 0
        assert _status(s, operator, agent_id) == "completed"


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"work" in argv:
            found.add(int(entry.name))
    return found


def test_a_server_supervises_its_further_workers_and_stops_them_with_itself(
    tmp_path: Path,
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "waiter", [{"wait_for_input": "go?"}, {"finish": "ok"}])
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    with stead_serve(store, "--specs", str(specs), "--workers", "3") as s:
        first = until(lambda: (c := _children(s.proc.pid)) and len(c) == 2 and c)
        killed = min(first)
        os.kill(killed, signal.SIGKILL)
        again = until(lambda: (c := _children(s.proc.pid)) and len(c) == 2 and killed not in c
                       and c)  # fmt: skip
        # the agents still run, by whichever worker takes them
        operator, _ = s.token(role="operator")
        made = _call(s, operator, "POST", "/v1/agents", json={"spec_file": "waiter.yaml"})
        agent_id = made.json()["agent_id"]
        until(lambda: _status(s, operator, agent_id) == "waiting")
        _call(s, operator, "POST", f"/v1/agents/{agent_id}/messages", json={"text": "go"})
        until(lambda: _status(s, operator, agent_id) == "completed")
        server = s.proc
    assert server.returncode is not None
    for pid in again:
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), f"worker {pid} lives on"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
