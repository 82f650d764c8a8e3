"""A served store with two tenants, a token of every role for each, and a spec folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.testclient import TestClient

from stead import Runtime
from stead.clock import SystemClock
from stead.server import Server, application
from stead.server.auth import mint
from stead.store.sqlite import SqliteStore
from stead.store.tokens import ROLES

TENANTS = ("acme", "globex")
VAULT_KEY = os.urandom(32)
WRITE = {"tool": "write_file", "args": {"path": "out.txt", "content": "hello"}}


@dataclass
class Served:
    client: TestClient
    server: Server
    tokens: dict[tuple[str, str], str]
    specs: Path

    def as_(self, tenant: str, role: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.tokens[(tenant, role)]}"}

    def runtime(self, tenant: str) -> Runtime:
        return Runtime(self.server.store, self.server.data_dir, tenant=tenant,
                       secret_key=VAULT_KEY)  # fmt: skip

    def call(self, method: str, path: str, tenant: str = "acme", role: str = "admin",
             **kwargs: Any) -> Any:  # fmt: skip
        return self.client.request(method, path, headers=self.as_(tenant, role), **kwargs)


def write_spec(folder: Path, name: str, script: list[Any], **spec: Any) -> None:
    (folder / f"{name}.script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {"name": name, "model": f"scripted:{name}.script.yaml",
            "tools": ["read_file", "write_file", "list_files"], **spec}  # fmt: skip
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "approver", [WRITE, {"finish": "done"}], autonomy="act_with_approval")
    write_spec(specs, "waiter", [{"wait_for_input": "go?"}, {"finish": "ok"}])
    store = SqliteStore(tmp_path / "db" / "stead.db")
    server = Server(store, tmp_path / "db", specs=specs, secret_key=VAULT_KEY)
    tokens = {}
    for tenant in TENANTS:
        for role in ROLES:
            plain, _ = mint(store, tenant, role, f"{role}@{tenant}", SystemClock())
            tokens[(tenant, role)] = plain
    with TestClient(application(server)) as client:
        yield Served(client, server, tokens, specs)
