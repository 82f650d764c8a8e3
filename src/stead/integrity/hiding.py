"""Hidden results at run time: a handle's value put into a call, and a query answered.

See :mod:`stead.integrity.handles` and :mod:`stead.integrity.quarantine` for
what hiding is and what it guarantees; this module reads the hidden values from
the journal and asks the quarantined reader, for one activation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..errors import InvalidAnswer, ModelError
from ..journal import Event, Kind
from ..models.accounting import attempt_fields, usage_fields
from ..ports import AgentPort
from .handles import handle_of, hidden_value, holds_handle, substitute
from .quarantine import QUERY_PROMPT, check_schema, prompt, read_answer, scripted_answer


class _Reading(AgentPort, Protocol):
    """An activation, as hidden results are read in it: its last committed version
    (older events are read from the store) and its model (the reader)."""

    @property
    def committed_version(self) -> int: ...

    @property
    def model(self) -> Any: ...


def _result_at(act: _Reading, seq: int) -> Event | None:
    """The tool result journaled at ``seq``, committed or still in this activation's buffer."""
    events = [e for e in act.buffer if e.seq == seq]
    if not events and 1 <= seq <= act.committed_version:
        events = list(act.store.read_events(act.record.agent_id, seq, seq))
    if not events or events[0].kind != Kind.TOOL_RESULT:
        return None
    return events[0]


def resolve(act: _Reading, seq: int, part: int | None) -> Any:
    """The hidden value ``$h{seq}[.part]`` names; InvalidAnswer if it names none."""
    ev = _result_at(act, seq)
    if ev is None:
        raise InvalidAnswer(f"$h{seq} names no result: use a handle a result showed you")
    return hidden_value(ev.data, seq, part)


def with_values(act: _Reading, args: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A call's arguments with each handle replaced by the value it hides, and which
    argument held which handle (empty when none did, and nothing is read)."""
    if not holds_handle(dict(args)):
        return dict(args), {}
    return substitute(args, lambda seq, part: resolve(act, seq, part))


def answer_query(act: _Reading, index: int, action: Mapping[str, Any]) -> None:
    """Ask the quarantined reader about a hidden value; journal the answer (or why
    there is none) as the action's outcome."""
    handle, question = str(action.get("handle", "")), str(action.get("question", ""))
    asked: dict[str, Any] = {"action": index, "handle": handle, "question": question}
    named = handle_of(handle)
    if named is not None:
        asked["source"] = named[0]  # the result the answer owes its origin to
    spent: dict[str, Any] = {}
    try:
        schema = check_schema(action.get("schema"))
        asked["schema"] = schema
        text, _ = with_values(act, {"handle": handle})
        if text["handle"] == handle:  # not a handle at all
            raise InvalidAnswer(f"query: {handle!r} is not a handle; handles look like $h12")
        ask_aside = getattr(act.model, "ask_aside", None)
        if ask_aside is None:  # the scripted model, or a custom one: the scripted reader
            answer = scripted_answer(schema, text["handle"])
        else:
            said = ask_aside(QUERY_PROMPT, prompt(schema, question, text["handle"]))
            spent = {
                **usage_fields(act.state.usage, said.usage),
                **attempt_fields(said.attempts),
                "model": said.model,
            }
            answer = read_answer(said.text, schema)
    except RecursionError:  # a schema nested past what can be checked
        act.emit(Kind.QUERY_ANSWERED, **asked, ok=False, error="query: the schema nests too deep")
        return
    except (InvalidAnswer, ModelError) as exc:
        act.emit(Kind.QUERY_ANSWERED, **asked, ok=False, error=str(exc), **spent)
        return
    act.emit(Kind.QUERY_ANSWERED, **asked, ok=True, answer=answer, **spent)
