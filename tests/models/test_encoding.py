"""A request's encoding is kept across steps: each step encodes what is new in it.

The bytes a step encodes afresh must not grow with the conversation (that is what
keeps a long agent's step as cheap as a short one's), and what is sent must be
exactly what encoding the whole request would give: the same JSON for both wire
formats, the same turns in the same order, and the same context hash as a render
that hashes the whole conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stead.canonical import dumps, sha256_hex
from stead.journal import Event, Kind
from stead.models.actions import offered_tools
from stead.models.anthropic import AnthropicModel
from stead.models.base import RenderedContext
from stead.models.conversation import Transcript, Turn, _ordered
from stead.models.openai import OpenAIModel
from stead.models.options import parse_model
from stead.models.provider import ProviderModel
from stead.runtime.context import Renderer
from stead.state import State
from stead.tools.registry import load_tools

SPEC: dict[str, Any] = {"name": "coder", "instructions": "Keep notes.", "limits": {"max_steps": 9}}


def models() -> list[ProviderModel]:
    made: list[ProviderModel] = []
    for provider, cls in (("openai", OpenAIModel), ("anthropic", AnthropicModel)):
        options = parse_model({"provider": provider, "name": "m", "base_url": "http://x/v1"})
        made.append(cls(options, None))
    return made


class Journal:
    """Events as an activation journals them, fed to a renderer's transcript."""

    def __init__(self) -> None:
        self.seq = 0
        self.step = 0
        self.renderer = Renderer(SPEC, load_tools(TOOLS))
        self.renderer.transcript = Transcript()

    def emit(self, kind: str, **data: Any) -> None:
        self.seq += 1
        self.renderer.observe(Event("a", self.seq, kind, 0.0, data, "", ""))

    def decide(self, actions: Sequence[Mapping[str, Any]]) -> None:
        self.step += 1
        self.emit(Kind.DECISION, step=self.step, actions=list(actions))

    def render(self) -> RenderedContext:
        return self.renderer.render(State(agent_id="a", decisions=self.step))


TOOLS = ("read_file", "write_file")


def whole_hash(context: RenderedContext, actions: str = "") -> str:
    """The context hash as a render that hashes everything at once would take it."""
    body = "[" + ",".join(m.encoded for m in context.messages) + "]"
    return sha256_hex(
        f'{{{actions}"messages":{body},"system":{dumps(context.system)},'
        f'"tools":{dumps(list(context.tools))}}}'
    )


def check(model: ProviderModel, context: RenderedContext) -> bytes:
    tools = offered_tools(context)
    sent = model.encode(context, tools)
    assert json.loads(sent) == model._streamed(model.request(context, tools))
    return sent


def test_the_bytes_a_step_encodes_do_not_grow_with_the_conversation() -> None:
    journal = Journal()
    openai, anthropic = models()
    fresh: dict[str, list[int]] = {"openai": [], "anthropic": []}
    sent: dict[str, list[int]] = {"openai": [], "anthropic": []}
    for i in range(300):
        call = f"r{i}"
        journal.decide(
            [
                {"type": "tool", "tool": "read_file", "args": {"path": f"{i}"}, "call_id": call},
                {"type": "remember", "values": {"last": i}},
            ]
        )
        journal.emit(Kind.TOOL_RESULT, call_id=call, ok=True, output="x" * 100)
        journal.emit(Kind.MEMORY_WRITTEN, action=1, values={"last": i})
        context = journal.render()
        assert context.hash == whole_hash(context)
        for name, model in (("openai", openai), ("anthropic", anthropic)):
            sent[name].append(len(check(model, context)))
            fresh[name].append(model.encoded_bytes)
    for name in fresh:
        assert sent[name][-1] > 10 * sent[name][10]  # the request grew tenfold...
        early, late = max(fresh[name][5:50]), max(fresh[name][250:])
        assert late <= early + 64, (name, early, late)  # ...what each step encodes did not
        assert late < sent[name][-1] / 20


def test_a_compaction_starts_the_kept_encoding_again() -> None:
    journal = Journal()
    openai, anthropic = models()
    for i in range(5):
        journal.decide([{"type": "tool", "tool": "read_file", "args": {}, "call_id": f"c{i}"}])
        journal.emit(Kind.TOOL_RESULT, call_id=f"c{i}", ok=True, output=f"out {i}")
    before = journal.render()
    journal.emit(Kind.CONTEXT_COMPACTED, through=journal.seq - 2, summary="read four files")
    after = journal.render()
    assert after.lineage is not before.lineage and after.hash == whole_hash(after)
    for model in (openai, anthropic):
        check(model, before)
        assert b"read four files" in check(model, after)


EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("decide"), st.integers(0, 3), st.booleans()),
        st.tuples(st.just("result"), st.integers(0, 6), st.booleans()),
        st.tuples(st.just("told"), st.sampled_from(["input", "message", "refused"]), st.none()),
        st.tuples(st.just("compact"), st.integers(0, 4), st.none()),
        st.tuples(st.just("render"), st.none(), st.none()),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(EVENTS)
def test_any_run_is_sent_as_encoding_it_whole_would_send_it(script: list[Any]) -> None:
    """Whatever the journal holds (unanswered calls, late results, words between a
    call and its result, compactions), the kept encoding sends what encoding the
    whole request sends, and the transcript orders turns as a whole ordering does."""
    journal = Journal()
    openai, anthropic = models()
    calls: list[str] = []
    for what, n, flag in script:
        if what == "decide":
            actions: list[dict[str, Any]] = []
            for j in range(n):
                calls.append(f"k{len(calls)}")
                actions.append({"type": "tool", "tool": "write_file", "args": {"j": j},
                                "call_id": calls[-1]})  # fmt: skip
            if flag:  # words beside the calls, or alone
                actions.append({"type": "finish", "summary": "said so", "said": True})
            journal.decide(actions)
        elif what == "result" and calls:
            call = calls[min(n, len(calls) - 1)]
            journal.emit(Kind.TOOL_RESULT, call_id=call, ok=flag, output="o", error="e")
        elif what == "told":
            kind = {"input": Kind.INPUT_RECEIVED, "message": Kind.MESSAGE_RECEIVED,
                    "refused": Kind.ANSWER_REFUSED}[n]  # fmt: skip
            journal.emit(kind, text="hi", reason="no", **{"from": "b"})
        elif what == "compact" and journal.seq:
            journal.emit(Kind.CONTEXT_COMPACTED, through=max(1, journal.seq - n), summary="s")
        transcript = journal.renderer.transcript
        assert transcript is not None
        assert transcript.messages("status") == reference_messages(transcript, "status")
        context = journal.render()
        assert context.hash == whole_hash(context)
        for model in (openai, anthropic):
            check(model, context)


def reference_messages(transcript: Transcript, status: str) -> list[Turn]:
    """The turns to send, ordered from all of them at once (as before they were kept)."""
    made = {c.id for t in transcript.turns if t.role == "assistant" for c in t.calls}
    kept = [t for t in transcript.turns if t.role != "tool" or t.call_id in made]
    head = (
        [Turn("user", f"Summary of the work so far:\n{transcript.summary}")]
        if transcript.summary
        else []
    )
    return [*head, *_ordered(kept), Turn("user", status)]
