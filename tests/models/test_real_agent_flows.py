"""A provider's model declares the flow its user's task names (``allow_flow``), as it
would against a real service: offered as a tool, called before it reads, refused
after. The model service is a fake server of each wire format on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stead import Kind, Runtime
from stead.tools.base import Tool, as_tool, tool

from .agents import provider_agent, runtime
from .fake_servers import FakeServer
from .test_providers import tool_answer

KEY = "sk-live-4f1c9a7e2b8d6035"
IBAN = "DE75512108001245126199"
PAID: list[str] = []


@tool(effect="read_only")
def read_bill() -> str:
    """The bill the user saved (the biller wrote it)."""
    return f"Invoice 118 from Northwind Power: pay to {IBAN}."


@tool(effect="effectful")
def pay(to: str) -> str:
    """Pay the bill to an account."""
    PAID.append(to)
    return "paid"


TOOLS: dict[str, Tool] = {t.__name__: as_tool(t) for t in (read_bill, pay)}
PLAN = ("allow_flow", {"from": "read_bill", "to": "pay", "reason": "the user named the bill"})


def agent(rt: Runtime, tmp_path: Path, provider: str, url: str) -> str:
    return provider_agent(
        rt, tmp_path, provider, url, KEY, name="bills",
        instructions="Pay the bill in my saved file.", scope=[{"tool": "*"}],
    )  # fmt: skip


@pytest.mark.parametrize(("provider", "first"), [("openai", True), ("anthropic", True),
                                                 ("openai", False)])  # fmt: skip
def test_a_provider_model_declares_the_flow_before_it_reads(
    tmp_path: Path, server: FakeServer, provider: str, first: bool
) -> None:
    PAID.clear()
    rt = runtime(tmp_path)
    agent_id = agent(rt, tmp_path, provider, server.url)
    read = tool_answer(provider, ("read_bill", {}))
    plan = tool_answer(provider, PLAN)
    server.queue(
        *((plan, read) if first else (read, plan)),
        tool_answer(provider, ("pay", {"to": IBAN})),
        tool_answer(provider, ("finish", {"summary": "paid the bill"})),
    )
    state = rt.run(agent_id, tools=TOOLS).state
    offered = json.dumps(server.seen[0].body.get("tools"))
    assert "allow_flow" in offered and "query" not in offered  # query: only where hiding
    (allowed,) = [e.data for e in rt.store.read_events(agent_id) if e.kind == Kind.FLOW_ALLOWED]
    if first:
        assert allowed["ok"] and state.status == "completed" and PAID == [IBAN]
    else:  # declared after reading the bill: refused, and the payment waits for a person
        assert not allowed["ok"] and "is in your view" in allowed["error"]
        assert state.waiting_for == "approval" and PAID == []
        said: Any = json.dumps(server.seen[2].body)
        assert "is in your view" in said  # the model was told why
