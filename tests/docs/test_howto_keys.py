"""The keys how-to, followed as an operator would: every command it shows that can run here.

It moves an agent to a store under a new vault key, sets a provider key bound to a
host, rotates an API token and a webhook's signing secret; the test then reads the
stores to check that each rotation left the new key live and the old one gone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .tutorial import HOW_TO, Reader, reader_env


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    env = reader_env(tmp_path)
    env["NEW_KEY"] = "sk-local-rotated-0123456789"  # the operator's new provider key
    r = Reader(tmp_path, env)
    try:
        yield r
    finally:
        r.close()


def as_json(reader: Reader, command: str) -> Any:
    ran = reader.run(command)
    assert ran.code == 0, ran.output
    return json.loads(ran.output)


def test_keys_and_rotation(reader: Reader, tmp_path: Path) -> None:
    reader.follow(HOW_TO / "keys-and-rotation.md")
    # the agent left the old store and lives on in the new one, under the new key
    (old,) = as_json(reader, "stead --json ls")
    assert old["status"] == "moved"
    new_store = "STEAD_SECRET_KEY_FILE=~/.stead-key-2 stead --store sqlite:///new/stead.db"
    (moved,) = as_json(reader, f"{new_store} --json ls")
    assert moved["name"] == "keeper" and moved["agent_id"] != "keeper"
    assert reader.run(f"{new_store} audit verify {moved['agent_id']}").code == 0
    # the new vault key cannot open the old store's secrets
    assert reader.run("STEAD_SECRET_KEY_FILE=~/.stead-key-2 stead audit verify keeper").code != 0

    secrets = {s["name"]: s for s in as_json(reader, "stead --json secret ls")}
    assert "MODEL_KEY" in secrets

    tokens = as_json(reader, "stead --json token ls")
    assert [t["revoked_at"] is not None for t in tokens] == [True, False]
    live = reader.run('echo "$NEW" | cut -d. -f2').output.strip()
    assert tokens[1]["token_id"] == live

    (hook,) = as_json(reader, "stead --json webhook ls")
    new_hook = json.loads((tmp_path / "new-hook.json").read_text())
    assert hook["hook_id"] == new_hook["hook_id"] and new_hook["secret"].startswith("whsec_")
