"""Webhooks for an agent driven by a provider's model over HTTP (both wire formats):
its write waits for approval and the webhook is told, with the tool and its
arguments in short; approved, it finishes and the webhook is told again."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from stead import parse_spec
from stead.clock import FakeClock
from stead.notify import Deliverer, Settings, hooks
from stead.notify.addresses import allowed_networks

from ..notify.receiver import receiver, verify
from .agents import VAULT_KEY, runtime
from .fake_servers import FakeServer
from .test_providers import tool_answer

KEY = "sk-live-4f1c9a7e2b8d6035"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_provider_agent_waiting_for_approval_is_told_then_its_completion(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    assert isinstance(rt.clock, FakeClock)
    rt.vault().set("default", f"{provider.upper()}_API_KEY", KEY, to=["127.0.0.1"],
                   at=rt.clock.now())  # fmt: skip
    spec = {"name": "writer", "instructions": "Write hello.txt, then finish.",
            "model": {"provider": provider, "name": "m-1", "base_url": server.url},
            "tools": ["write_file"], "autonomy": "act_with_approval"}  # fmt: skip
    agent_id = rt.create(parse_spec(spec, tmp_path)).agent_id
    server.queue(
        tool_answer(provider, ("write_file", {"path": "hello.txt", "content": "hello"})),
        tool_answer(provider, ("finish", {"summary": "wrote hello.txt"})),
    )
    rows = hooks.rows_of(rt.store)
    with receiver([]) as box:
        secret, _ = hooks.add(rows, "default", box.url, None, rt.clock, VAULT_KEY,
                              allowed_networks("127.0.0.1"))  # fmt: skip
        d = Deliverer(rows, rt.clock, settings=Settings(timeout=2), key=VAULT_KEY,
                      allow=allowed_networks("127.0.0.1"), rng=random.Random(5))  # fmt: skip
        assert rt.run(agent_id).state.status == "waiting"
        assert len(d.deliver_due().delivered) == 1
        ((_, approval),) = rt.pending_approvals("default")
        rt.approve(approval["approval_id"], 900.0)
        assert rt.run(agent_id).state.status == "completed"
        assert len(d.deliver_due().delivered) == 1
        d.close()
    asked, done = (json.loads(r.body) for r in box.got)
    assert asked["type"] == "approval.requested"
    assert asked["data"]["approval"]["tool"] == "write_file"
    assert json.loads(asked["data"]["approval"]["args_summary"]) == {
        "path": "hello.txt", "content": "hello"}  # fmt: skip
    assert done["type"] == "agent.completed" and done["data"]["reason"] == "wrote hello.txt"
    assert all(verify(secret, r.headers, r.body) for r in box.got)
    assert all(KEY not in r.body.decode() for r in box.got)
    rt.close()
