"""The memory endpoints: a viewer lists an agent's long-term memories (and its
tenant's shared ones) and asks what it would recall; an operator adds, corrects
and forgets them, each change journaled on the agent with who made it."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from ..memories.book import MAX_RECALLED, MAX_TEXT
from ..memories.person import Memories
from .api import one_agent
from .app import Call, Endpoint
from .schemas import ID, NUMBER, OBJECT, TEXT, answer, listing, strict

MEMORY = answer({
    "memory_id": ID, "owner": TEXT, "text": TEXT, "source": TEXT, "provenance": OBJECT,
    "made_by": TEXT, "made_at": NUMBER, "changed_at": NUMBER, "embedder": TEXT,
}, required=["memory_id", "owner", "text", "source"])  # fmt: skip
FOUND = answer({**MEMORY["properties"], "score": NUMBER}, required=["memory_id", "score"])
_TEXT = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}
ADD = strict({"text": _TEXT, "shared": {"type": "boolean"}}, required=["text"])
CORRECT = strict({"text": _TEXT}, required=["text"])
RECALL = {"q": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
          "k": {"type": "integer", "minimum": 1, "maximum": MAX_RECALLED}}  # fmt: skip


def list_memories(call: Call) -> Any:
    return [m.to_json() for m in Memories(call.rt).list(call.params["agent_id"])]


def recall_memories(call: Call) -> Any:
    given = str(call.query.get("k") or "5")
    if not given.isdigit() or len(given) > 3:  # the book checks the range
        raise UsageError(f"k must be a whole number from 1 to {MAX_RECALLED}, not {given[:20]!r}")
    k = int(given)
    found = Memories(call.rt).recall(call.params["agent_id"], str(call.query.get("q", "")), k)
    return [{**f.row.to_json(), "score": round(f.score, 4)} for f in found]


@one_agent
def add_memory(call: Call) -> Any:
    shared = bool(call.body.get("shared", False))
    return (
        Memories(call.rt).add(call.params["agent_id"], call.body["text"], shared=shared).to_json()
    )


@one_agent
def correct_memory(call: Call) -> Any:
    p = call.params
    return Memories(call.rt).correct(p["agent_id"], p["memory_id"], call.body["text"]).to_json()


@one_agent
def forget_memory(call: Call) -> None:
    Memories(call.rt).forget(call.params["agent_id"], call.params["memory_id"])


_ONE = "/v1/agents/{agent_id}/memories/{memory_id}"
ENDPOINTS = [
    Endpoint("GET", "/v1/agents/{agent_id}/memories", "read",
             "An agent's long-term memories and its tenant's shared ones",
             list_memories, listing(MEMORY), tag="memories"),
    Endpoint("GET", "/v1/agents/{agent_id}/memories/recall", "read",
             "What the agent would recall for a query (q), nearest first",
             recall_memories, listing(FOUND), query=RECALL, tag="memories"),
    Endpoint("POST", "/v1/agents/{agent_id}/memories", "operate",
             "Save a memory a person wrote (trusted; shared: the tenant's shared memory)",
             add_memory, MEMORY, body=ADD, status=201, tag="memories"),
    Endpoint("PUT", _ONE, "operate", "Replace a memory's text (the person's from now on)",
             correct_memory, MEMORY, body=CORRECT, tag="memories"),
    Endpoint("DELETE", _ONE, "operate", "Forget a memory: its text and vector are erased",
             forget_memory, {}, status=204, tag="memories"),
]  # fmt: skip
