"""A model's answer of text and no tool call: the agent speaking to its person.

By the spec's ``on_text``: the agent waits for its person's reply (``wait``,
the default), claims the task done, checked as any finish is (``finish``), or
the answer is refused as before (``refuse``). Against each provider's wire
format (a fake server on 127.0.0.1) and the scripted model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stead import Kind, Runtime, parse_spec
from stead.summaries import summarize

from ..governance.agents import make_agent, run, runtime_at
from .agents import runtime
from .fake_servers import FakeServer
from .test_providers import text_answer, tool_answer
from .test_real_agent import KEY, PROVIDERS, kinds

WORDS = "Which file should I write, hello.txt or hi.txt?"


def provider_agent(rt: Runtime, tmp_path: Path, provider: str, url: str, **fields: Any) -> str:
    rt.vault().set("default", f"{provider.upper()}_API_KEY", KEY, to=["127.0.0.1"],
                   at=rt.clock.now())  # fmt: skip
    spec = {
        "name": "writer",
        "instructions": "Write the file the person names, then finish.",
        "model": {"provider": provider, "name": "m-1", "base_url": url},
        "tools": ["write_file", "read_file"],
        **fields,
    }
    return rt.create(parse_spec(spec, tmp_path)).agent_id


def assistant_texts(body: dict[str, Any]) -> list[str]:
    """The assistant turns' text in a request body, either wire format."""
    out = []
    for m in body["messages"]:
        if m["role"] != "assistant":
            continue
        content = m["content"]
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if b["type"] == "text")
        out.append(content or "")
    return out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_text_answer_is_the_agent_asking_and_the_reply_resumes_it(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    agent_id = provider_agent(rt, tmp_path, provider, server.url)
    server.queue(text_answer(provider, WORDS))
    state = rt.run(agent_id).state
    assert (state.status, state.waiting_for, state.status_reason) == ("waiting", "input", WORDS)
    asked = kinds(rt, agent_id, Kind.INPUT_REQUESTED)
    assert [(a["prompt"], a.get("said")) for a in asked] == [(WORDS, True)]
    assert kinds(rt, agent_id, Kind.ANSWER_REFUSED) == []
    assert len(server.seen) == 1  # no round trip to be told to call tools

    rt.send(agent_id, "hi.txt please")
    server.queue(
        tool_answer(provider, ("write_file", {"path": "hi.txt", "content": "hi"})),
        tool_answer(provider, ("finish", {"summary": "wrote hi.txt"})),
    )
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    second = server.seen[1].body
    assert assistant_texts(second) == [WORDS]  # its own words, as it said them
    assert "A person says: hi.txt please" in str(second["messages"])
    if provider == "openai":  # the API refuses an empty list of calls
        said = next(m for m in second["messages"] if m["role"] == "assistant")
        assert "tool_calls" not in said
    rt.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_on_text_finish_is_a_claim_checked_like_any_finish(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    goal = {"id": "file", "description": "hi.txt exists", "accept": [{"files_exist": ["hi.txt"]}]}
    agent_id = provider_agent(rt, tmp_path, provider, server.url, on_text="finish", goals=[goal])
    server.queue(
        text_answer(provider, "All done, I wrote hi.txt."),  # it did not: rejected
        tool_answer(
            provider,
            ("write_file", {"path": "hi.txt", "content": "hi"}),
            ("complete_goal", {"id": "file"}),
        ),
        text_answer(provider, "Now hi.txt is written."),
    )
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    rejected = kinds(rt, agent_id, Kind.FINISH_REJECTED)
    assert rejected[0]["summary"] == "All done, I wrote hi.txt."
    assert "goal file is not completed" in rejected[0]["reasons"]
    assert [c["summary"] for c in kinds(rt, agent_id, Kind.FINISH_CLAIMED)] == [
        "Now hi.txt is written."
    ]
    # the model was told its words were not taken as the end
    assert "taken as the task's end, but it was not accepted" in str(server.seen[1].body)
    rt.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_on_text_refuse_keeps_tool_only_models_calling_tools(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    agent_id = provider_agent(rt, tmp_path, provider, server.url, on_text="refuse")
    server.queue(
        text_answer(provider, "Sure."),
        tool_answer(provider, ("finish", {"summary": "nothing to do"})),
    )
    assert rt.run(agent_id).state.status == "completed"
    refused = kinds(rt, agent_id, Kind.ANSWER_REFUSED)
    assert [r["answer"]["text"] for r in refused] == ["Sure."]
    assert refused[0]["usage"]["tokens"] > 0 and refused[0]["attempts"][0]["status"] == 200
    assert "could not be used: your answer called no tool" in str(server.seen[1].body)
    rt.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_text_beside_calls_is_journaled_as_the_decisions_words(
    tmp_path: Path, server: FakeServer, provider: str
) -> None:
    rt = runtime(tmp_path)
    agent_id = provider_agent(rt, tmp_path, provider, server.url)
    call = tool_answer(provider, ("finish", {"summary": "done"}))
    if provider == "openai":
        call.body["choices"][0]["message"]["content"] = "Nothing to write; I finish."
    else:
        call.body["content"].insert(0, {"type": "text", "text": "Nothing to write; I finish."})
    server.queue(call)
    assert rt.run(agent_id).state.status == "completed"
    assert [d.get("text") for d in kinds(rt, agent_id, Kind.DECISION)] == [
        "Nothing to write; I finish."
    ]
    decision = next(e for e in rt.store.read_events(agent_id) if e.kind == Kind.DECISION)
    assert summarize(decision) == 'step 1: finish — "Nothing to write; I finish."'
    rt.close()


def test_the_scripted_model_says_and_waits(tmp_path: Path) -> None:
    from stead import FakeClock

    rt = runtime_at(tmp_path, FakeClock(1000.0))
    agent_id = make_agent(rt, tmp_path, [{"say": WORDS}, {"finish": "answered"}])
    state = run(rt, agent_id).state
    assert (state.status, state.status_reason) == ("waiting", WORDS)
    lines = [summarize(e) for e in rt.store.read_events(agent_id)]  # stead trace, the page
    assert "step 1: said (text, no tool call)" in lines
    assert f"the agent says: {WORDS}" in lines
    rt.send(agent_id, "hello.txt")
    assert run(rt, agent_id).state.status == "completed"
    rt.close()


def test_on_text_is_checked_in_the_spec(tmp_path: Path) -> None:
    from stead.errors import SpecError

    with pytest.raises(SpecError, match=r"on_text.*wait, finish, refuse"):
        parse_spec({"name": "x", "model": "openai:gpt-4o-mini", "on_text": "shout"}, tmp_path)
    assert parse_spec({"name": "x", "model": "openai:gpt-4o-mini"}, tmp_path).on_text == "wait"
