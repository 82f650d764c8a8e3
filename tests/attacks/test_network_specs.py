"""Boundary: specs and archives over HTTP, against a real ``stead serve`` (docs/security.md).

A token holder of the ``operator`` role sends the server specs and archives.
What must never happen: a spec or an archive from the network makes the
server import Python (a custom monitor, a predicate, a tool named
``module:function``, a module an agent wrote into its workspace), read a host
folder (``workspace:``, ``base_dir``), start a program (MCP servers), or send
a model's key to a server of the token holder's choosing. Each is refused
with a 400 that names the field, before anything is stored or staged.

The server here is a process of its own, started as an operator would, with
``python -m stead serve`` from the data folder's parent: that puts the
current folder on ``sys.path``, so the data folder is reachable by a dotted
name from there too (``data.workspaces.acme.ID.evil``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from stead.clock import SystemClock
from stead.sandbox.secrets import new_key
from stead.server.auth import mint
from stead.spec import parse_spec
from stead.store.sqlite import SqliteStore
from stead.store.tokens import ROLES

from .test_archives import forged

REPO = Path(__file__).resolve().parents[2]
EVIL = """\
import pathlib
pathlib.Path({marker!r}).write_text("ran")


def f(*args, **kwargs):
    return None
"""
MODEL = {"provider": "openai", "name": "gpt-4o-mini"}


@dataclass
class Live:
    """A real server on a port, its data folder, and a token of every role of tenant acme."""

    base: str
    data: Path
    specs: Path
    marker: Path
    tokens: dict[str, str]

    def call(self, method: str, path: str, role: str = "operator", **kwargs: Any) -> Any:
        headers = {"authorization": f"Bearer {self.tokens[role]}", **kwargs.pop("headers", {})}
        return httpx.request(method, self.base + path, headers=headers, timeout=30, **kwargs)

    def create(self, spec: dict[str, Any]) -> Any:
        return self.call("POST", "/v1/agents", json={"spec": spec})

    def agents(self) -> list[str]:
        return [a["agent_id"] for a in self.call("GET", "/v1/agents", "viewer").json()]

    def run(self, agent_id: str, statuses: set[str]) -> str:
        assert self.call("POST", f"/v1/agents/{agent_id}/run").status_code == 202
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = self.call("GET", f"/v1/agents/{agent_id}", "viewer").json()["state"]
            if state["status"] in statuses:
                return str(state["status"])
            time.sleep(0.1)
        pytest.fail(f"{agent_id} did not reach {statuses}")

    def files(self) -> set[str]:
        """Everything under the data folder but the store's own files."""
        return {str(p.relative_to(self.data)) for p in self.data.rglob("*")
                if not p.name.startswith("stead.db")}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    data, specs = tmp_path / "data", tmp_path / "specs"
    specs.mkdir()
    store = SqliteStore(data / "stead.db")
    tokens = {role: mint(store, "acme", role, role, SystemClock())[0] for role in ROLES}
    store.close()
    marker = tmp_path / "pwned"
    # an agent whose model (a script here) writes a Python module into its workspace
    script = [{"tool": "write_file", "args": {"path": "evil.py",
                                              "content": EVIL.format(marker=str(marker))}},
              {"finish": "done"}]  # fmt: skip
    (specs / "writer.script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    writer = {"name": "writer", "model": "scripted:writer.script.yaml", "tools": ["write_file"]}
    (specs / "writer.yaml").write_text(yaml.safe_dump(writer), encoding="utf-8")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env |= {"PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
            "STEAD_SECRET_KEY": new_key(), "STEAD_UNSANDBOXED": "1"}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "stead", "serve", "--store", f"sqlite:///{data / 'stead.db'}",
         "--specs", str(specs), "--port", str(port), "--workers", "0"],  # runs when asked
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/v1/health", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
                time.sleep(0.1)
        yield Live(base, data, specs, marker, tokens)
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def _written(live: Live) -> str:
    """An agent of the tenant that wrote evil.py into its workspace; its id."""
    got = live.call("POST", "/v1/agents", json={"spec_file": "writer.yaml"})
    assert got.status_code == 201, got.text
    agent_id = str(got.json()["agent_id"])
    assert live.run(agent_id, {"completed", "failed"}) == "completed"
    assert (live.data / "workspaces" / "acme" / agent_id / "evil.py").is_file()
    return agent_id


def _refused(got: Any, *needles: str) -> None:
    assert got.status_code == 400, got.text
    message = got.json()["error"]["message"]
    for needle in needles:
        assert needle in message, message


def test_a_spec_naming_python_in_a_workspace_or_installed_is_refused(live: Live) -> None:
    writer = _written(live)
    module = f"workspaces.acme.{writer}.evil"
    hostile = [
        ({"monitors": {"custom": [{"python": f"{module}:f"}]}}, "monitors.custom[0].python"),
        ({"monitors": {"custom": [{"python": f"data.{module}:f"}]}}, "monitors.custom[0].python"),
        ({"monitors": {"custom": [{"python": "os:system"}]}}, "monitors.custom[0].python"),
        ({"goals": [{"id": "g", "accept": [{"predicate": f"{module}:f"}]}]},
         "goals[0].accept[0].predicate"),
        ({"tools": [f"{module}:f"]}, "tools[0]"),
        ({"tools": [{"tool": "shell", "env": ["HOME"]}]}, "tools[0].env"),
        ({"tools": [{"tool": "shell", "secrets": ["GITHUB_TOKEN"]}]}, "tools[0].secrets"),
        ({"model": {**MODEL, "summarizer": "scripted:/etc/passwd"}}, "model"),
        ({"base_dir": str(live.data)}, "base_dir"),
        ({"script": [{"finish": "x"}]}, "script"),
    ]  # fmt: skip
    for extra, field in hostile:
        got = live.create({"name": "x", "model": MODEL, **extra})
        assert not live.marker.exists(), f"{extra}: the server ran a module an agent wrote"
        _refused(got, field, "spec folder")
    assert live.agents() == [writer]


def test_a_spec_from_the_network_names_no_host_folder(live: Live) -> None:
    before = live.files()
    for folder in ("/etc/ssl", ".", "workspaces", "../specs", str(live.data)):
        got = live.create({"name": "x", "model": MODEL, "workspace": folder})
        _refused(got, "'workspace'", "spec folder")
    assert live.files() == before  # nothing staged, nothing left behind
    assert live.agents() == []


def test_a_spec_from_the_network_sends_its_key_only_where_the_policy_allows(
    live: Live,
) -> None:
    other = {**MODEL, "base_url": "https://models.example.net/v1", "api_key_secret": "KEY"}
    _refused(live.create({"name": "x", "model": other}), "base_url", "policy")
    summarized = {**MODEL, "summarizer": {"provider": "openai", "name": "m",
                                          "base_url": "https://models.example.net/v1"}}  # fmt: skip
    _refused(live.create({"name": "x", "model": summarized}), "base_url")
    # the provider's own endpoint needs no policy
    own = {**MODEL, "base_url": "https://api.openai.com/v1"}
    made = live.create({"name": "x", "model": own})
    assert made.status_code == 201, made.text
    agent_id = made.json()["agent_id"]
    swap = live.call("PUT", f"/v1/agents/{agent_id}/model", json={"model": other})
    _refused(swap, "base_url")
    # an admin names the endpoints the tenant's network specs may use
    policy = ('@model_base_url("https://models.example.net/v1")\n'
              "permit(principal, action, resource);\n")  # fmt: skip
    assert live.call("PUT", "/v1/policy", "admin", json={"text": policy}).status_code == 200
    assert live.create({"name": "x", "model": other}).status_code == 201
    assert (
        live.call("PUT", f"/v1/agents/{agent_id}/model", json={"model": other}).status_code == 200
    )


def test_only_an_admin_spec_grants_the_network(live: Live) -> None:
    """Adding a network grant over HTTP takes an admin: so does a spec carrying one."""
    spec = {"name": "x", "model": MODEL, "tools": ["shell"],
            "scope": [{"tool": "shell"}, {"tool": "network"}]}  # fmt: skip
    for role in ("operator", "approver"):
        _refused(live.call("POST", "/v1/agents", role, json={"spec": spec}), "network", "admin")
    assert live.agents() == []
    made = live.call("POST", "/v1/agents", "admin", json={"spec": spec})
    assert made.status_code == 201, made.text


def _archive(live: Live, tmp_path: Path) -> Path:
    """A real archive of an agent made from a spec sent over the network."""
    made = live.create({"name": "plain", "model": MODEL, "tools": ["read_file"]})
    assert made.status_code == 201, made.text
    got = live.call("POST", f"/v1/agents/{made.json()['agent_id']}/export", json={})
    assert got.status_code == 200, got.text
    path = tmp_path / "plain.stead"
    path.write_bytes(got.content)
    return path


def test_an_archive_over_http_carries_only_what_a_network_spec_may(
    live: Live, tmp_path: Path
) -> None:
    writer = _written(live)
    archive = _archive(live, tmp_path)
    workspace = live.data / "workspaces" / "acme" / writer
    clean = parse_spec({"name": "imported", "tenant": "acme", "model": MODEL,
                        "tools": ["read_file"]}).to_record()  # fmt: skip
    clean["base_dir"] = ""  # a spec from the network has no folder
    hostile = [
        # the second of two chained imports: a tool from the first agent's workspace
        ({"base_dir": str(workspace), "tools": ["evil:f"]}, "tools[0]"),
        ({"base_dir": str(live.data)}, "base_dir"),
        ({"tools": ["os:system"]}, "tools[0]"),
        ({"monitors": {"custom": [{"python": "evil:f"}]}}, "monitors.custom[0].python"),
        ({"mcp": [{"name": "s", "command": ["sh", "-c", "id"]}]}, "mcp"),
        ({"model": "scripted:/etc/passwd", "model_options": None,
          "script": [{"finish": "x"}]}, "model"),
        ({"workspace": "/etc/ssl"}, "workspace"),
        ({"goals": [{"id": "g", "description": "", "accept": [{"predicate": "evil:f"}]}]},
         "goals[0].accept[0].predicate"),
    ]  # fmt: skip
    before = set(live.agents())
    files = live.files()
    for i, (change, field) in enumerate(hostile):
        out = tmp_path / f"hostile{i}.stead"
        header = read_header(archive)
        forged(archive, out, {}, {"agent": {**header["agent"], "spec": {**clean, **change}}})
        got = live.call("POST", "/v1/agents/import", content=out.read_bytes(),
                        headers={"content-type": "application/octet-stream"})  # fmt: skip
        if got.status_code == 201:  # what the refusal is there to prevent: run, and see
            live.call("POST", f"/v1/agents/{got.json()['agent_id']}/run")
            deadline = time.monotonic() + 10
            while not live.marker.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not live.marker.exists(), f"case {i}: the server ran a module an agent wrote"
        _refused(got, field)
    assert not live.marker.exists()
    assert set(live.agents()) == before
    assert live.files() == files
    # the archive of an agent made over the network imports as it is
    got = live.call("POST", "/v1/agents/import", content=archive.read_bytes())
    assert got.status_code == 201, got.text


def read_header(path: Path) -> dict[str, Any]:
    from stead.snapshots.archive import read_archive

    return dict(read_archive(path).header)
