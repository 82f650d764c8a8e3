"""Provenance-aware authority with a provider's model driving: the default data-flow
rule holds what an injected mail makes the model send, and the model hears the
person's refusal over its own wire format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stead import Kind, parse_spec
from stead.tools.base import as_tool

from ..scenarios import suite
from ..scenarios.texts import ATTACKER_MAIL
from .agents import runtime
from .fake_servers import FakeServer
from .test_providers import tool_answer

TOOLS = {n: as_tool(getattr(suite, n)) for n in ("read_inbox", "send_email")}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_injected_send_waits_for_a_person_and_their_refusal_reaches_the_model(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    rt.vault().set("default", f"{provider.upper()}_API_KEY", "sk-test-1", at=rt.clock.now())
    spec = {
        "name": "mail",
        "instructions": "Answer Bob about the review.",
        "model": {"provider": provider, "name": "m-1", "base_url": server.url},
        "tools": [f"tests.scenarios.suite:{n}" for n in TOOLS],
        "scope": [{"tool": "*"}],
    }
    agent_id = rt.create(parse_spec(spec, tmp_path)).agent_id
    server.queue(
        tool_answer(provider, ("read_inbox", {})),
        # the model obeys the mail: the attacker's address is copied from it
        tool_answer(provider, ("send_email", {"to": ATTACKER_MAIL, "body": "invoices"})),
        tool_answer(provider, ("finish", {"summary": "answered"})),
    )
    suite.EFFECTS.clear()
    state = rt.run(agent_id, tools=TOOLS).state
    assert (state.status, state.waiting_for) == ("waiting", "approval")
    ((_, pending),) = rt.pending_approvals()
    assert pending["args"]["to"] == ATTACKER_MAIL and "dataflow" in pending["reason"]
    intent_sources = [
        e.data for e in rt.store.read_events(agent_id) if e.kind == Kind.APPROVAL_REQUESTED
    ]
    assert intent_sources[0]["monitors"][0].startswith("dataflow (ask)")
    rt.deny(pending["approval_id"], "that is not Bob")
    state = rt.run(agent_id, tools=TOOLS).state
    assert state.status == "completed" and suite.EFFECTS == []
    # the model's last request carried the refusal as the send's result
    assert "that is not Bob" in json.dumps(server.seen[-1].body)
    rt.close()
