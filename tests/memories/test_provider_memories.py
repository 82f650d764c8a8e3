"""An agent driven by a provider's model (OpenAI wire format, a fake server of ours)
saves and recalls memories with the vectors of the provider's /v1/embeddings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stead import Kind
from stead.memories import Memories, person
from stead.memories.embedders import HashEmbedder
from stead.memories.vectors import unpack

from ..models.agents import provider_agent, runtime
from ..models.fake_servers import FakeServer, Reply, openai_embeddings
from ..models.test_providers import tool_answer

KEY = "sk-test-KEY-0123456789"
HASHED = HashEmbedder(64)


def embeddings_of(texts: list[str]) -> Reply:
    """The server's vectors: a hashed bag of words (64 dimensions), as lists of floats."""
    return openai_embeddings([list(unpack(v)) for v in HASHED.embed(texts)])


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


def serve(server: FakeServer, decisions: list[Reply]) -> None:
    """Embeddings answered from the request; decisions from the list, in order."""

    def respond(body: Any) -> Reply:
        if isinstance(body, dict) and "input" in body:
            return embeddings_of(list(body["input"]))
        return decisions.pop(0)

    server.responder = respond


def test_a_provider_agent_saves_and_recalls_with_the_providers_embeddings(
    tmp_path: Path, server: FakeServer
) -> None:
    rt = runtime(tmp_path)
    agent_id = provider_agent(rt, tmp_path, "openai", server.url, KEY, name="helper",
                              instructions="Remember what matters.",
                              tools=["save_memory", "recall_memories"],
                              on_text="refuse")  # fmt: skip
    serve(server, [
        tool_answer("openai", ("save_memory", {"text": "the deploy window is Tuesday 14:00"})),
        tool_answer("openai", ("save_memory", {"text": "lunch is at noon"})),
        tool_answer("openai", ("recall_memories", {"query": "when is the deploy window", "k": 1})),
        tool_answer("openai", ("finish", {"summary": "done"})),
    ])  # fmt: skip
    state = rt.run(agent_id, max_steps=4).state
    assert state.status == "completed", state.status_reason
    asked = [s for s in server.seen if s.path.endswith("/embeddings")]
    assert [s.body["input"] for s in asked] == [
        ["the deploy window is Tuesday 14:00"],
        ["lunch is at noon"],
        ["when is the deploy window"],
    ]
    assert all(s.body["model"] == "text-embedding-3-small" for s in asked)
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in asked)
    (recall,) = [e for e in rt.store.read_events(agent_id)
                 if e.kind == Kind.TOOL_RESULT and e.data["tool"] == "recall_memories"]  # fmt: skip
    assert [m["text"] for m in recall.data["output"]["memories"]] == [
        "the deploy window is Tuesday 14:00"]  # fmt: skip
    # the person's view: the same memories, in the provider's vector space
    listed = person.listed(rt, agent_id)
    assert {m.embedder for m in listed} == {f"openai:text-embedding-3-small@{server.url}"}
    assert KEY not in str([e.data for e in rt.store.read_events(agent_id)])
    # a person's memory gets the provider's vector too, and the agent's recall finds it
    row = Memories(rt).add(agent_id, "the on-call phone is 555-0100")
    assert server.seen[-1].body["input"] == ["the on-call phone is 555-0100"]
    found = Memories(rt).recall(agent_id, "who is on call, which phone", 1)
    assert [f.row.memory_id for f in found] == [row.memory_id]
    rt.close()


def test_the_command_line_embeds_with_the_agents_provider(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    from stead.cli.main import main

    from ..models.agents import VAULT_KEY

    rt = runtime(tmp_path)
    agent_id = provider_agent(rt, tmp_path, "openai", server.url, KEY, name="helper",
                              tools=["recall_memories"], on_text="refuse")  # fmt: skip
    rt.close()
    serve(server, [])
    monkeypatch.setenv("STEAD_SECRET_KEY", base64.b64encode(VAULT_KEY).decode())
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "data")]
    assert main(["memories", "add", agent_id, "the staging host is st-4", *store]) == 0
    (asked,) = [s for s in server.seen if s.path.endswith("/embeddings")]
    assert asked.body["input"] == ["the staging host is st-4"]
    assert asked.headers["authorization"] == f"Bearer {KEY}"
    rt = runtime(tmp_path)
    (row,) = person.listed(rt, agent_id)
    assert row.source == "person" and row.embedder.startswith("openai:text-embedding-3-small@")
    rt.close()
