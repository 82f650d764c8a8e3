"""The conversation a provider's model is shown: the run as its own tool calls and results.

A :class:`Transcript` is built from the agent's journal, one event at a time
(:meth:`Transcript.observe`), so the same events always give the same turns:

* a decision is the model's turn, its actions as tool calls (the agent's tools
  and the runtime's actions, named as :mod:`stead.models.actions` offers them);
* each action's outcome is that call's result: a tool's output whole up to
  :data:`RESULT_CAP` characters, and past it a note saying how to read on with
  the ``read_result`` action; a rejected goal or finish, a refusal, a call held
  for a person's approval;
* what reaches the agent between decisions (a person's answer, another agent's
  message, an answer of the model's that could not be used) is a user turn.

The turns only grow from one step to the next, so a provider's prompt cache
hits on everything but the newest turns. What changes every step (goals,
memory, notices, the step count) is not in the turns but in the state message
:func:`status_text`, always last. When the turns would pass the model's
window, the older ones are compacted: a summary is journaled
(``context_compacted``) and from then on shown in place of the turns it covers
(:meth:`Transcript.compact`); the journal keeps everything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..canonical import dumps
from ..journal import Event, Kind
from ..state import State

RESULT_CAP = 16_000
"""How many characters of one result the conversation shows before a note to read on."""
_DONE = "done"


@dataclass(frozen=True)
class Call:
    """One tool call of the model's turn: its id, the tool's name, its arguments."""

    id: str
    name: str
    args: Mapping[str, Any]

    @cached_property
    def args_json(self) -> str:
        """The arguments as canonical JSON, made once (a turn is sent at every step)."""
        return dumps(dict(self.args))


@dataclass(frozen=True)
class Turn:
    """One message: the model's (text and calls), a call's result, or the user's text."""

    role: str  # "assistant" | "tool" | "user"
    text: str = ""
    calls: tuple[Call, ...] = ()
    call_id: str = ""
    is_error: bool = False
    seq: int = 0
    """The journal event this turn came from (where a compaction may cut)."""

    @cached_property
    def encoded(self) -> str:
        """:meth:`to_json` as canonical JSON, made once: what the context hash covers."""
        return dumps(self.to_json())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "text": self.text}
        if self.calls:
            out["calls"] = [{"id": c.id, "name": c.name, "args": dict(c.args)} for c in self.calls]
        if self.call_id:
            out["call_id"] = self.call_id
        if self.is_error:
            out["is_error"] = True
        return out


def call_of(action: Mapping[str, Any], call_id: str) -> Call:
    """The tool call a journaled action was (the inverse of ``actions_from_calls``)."""
    kind = action["type"]
    if kind == "tool":
        return Call(call_id, str(action["tool"]), dict(action.get("args") or {}))
    if kind == "message":
        args = {k: action[k] for k in ("to", "text", "kind") if k in action}
        return Call(call_id, "send_message", args)
    fields = {
        "remember": ("values",),
        "push_goal": ("id", "description"),
        "complete_goal": ("id",),
        "finish": ("summary",),
        "wait_for_input": ("prompt",),
        "wait": ("seconds", "until", "reason"),
        "delegate": ("to", "grant", "narrow"),
        "read_result": ("call", "offset"),
        "query": ("handle", "question", "schema"),
        "allow_flow": ("from", "to", "args", "uses", "reason"),
    }.get(kind)
    if fields is None:  # an escalation: never offered, shown as what it asked
        return Call(call_id, kind, {"request": action.get("request")})
    return Call(call_id, kind, {k: action[k] for k in fields if k in action})


def read_on(call: str, offset: int, more: int) -> str:
    """The note ending a cut result: how many characters are left, how to read them."""
    where = dumps({"call": call, "offset": offset})
    return f"\n[cut here: {more} more characters. To read on, call read_result with {where}]"


def _output_text(d: Mapping[str, Any], call: str) -> tuple[str, bool]:
    if not d.get("ok"):  # an error quoting hidden text is hidden too
        return str(d["shown"] if "shown" in d else d.get("error") or "failed"), True
    output = d["shown"] if "shown" in d else d.get("output")  # hidden parts as handles
    text = output if isinstance(output, str) else dumps(output)
    if len(text) > RESULT_CAP:
        text = text[:RESULT_CAP] + read_on(call, RESULT_CAP, len(text) - RESULT_CAP)
    return text, False


@dataclass
class Transcript:
    """The turns of one agent's conversation since its last compaction."""

    summary: str = ""
    through: int = 0
    """The last journal seq the summary covers (0: none)."""
    turns: list[Turn] = field(default_factory=list)
    _open: dict[int, str] = field(default_factory=dict)  # action index -> call id
    _ids: dict[str, str] = field(default_factory=dict)  # runtime call id -> the model's
    cut_results: dict[str, int] = field(default_factory=dict)
    """The journal seq of each result shown cut, by the model's id of its call."""
    _answered: set[str] = field(default_factory=set)
    # What is sent, kept as it grows so a step costs what is new, not the whole
    # conversation: the turns in their final order up to the newest decision (only
    # ever appended to until a compaction), and the raw turns since that decision,
    # ordered at each step. A new decision closes what came before it for good.
    _final: list[Turn] = field(default_factory=list)
    _tail: list[Turn] = field(default_factory=list)
    _made: set[str] = field(default_factory=set)
    lineage: object = field(default_factory=object)
    """Changes when the final turns are rebuilt (a compaction): until then, what was
    sent at one step is a prefix of what is sent at the next."""

    def observe(self, ev: Event) -> None:
        """Add what ``ev`` shows the model, if anything."""
        if ev.seq <= self.through:
            return
        d, k = ev.data, ev.kind
        if k == Kind.CONTEXT_COMPACTED:
            self.compact(int(d["through"]), str(d["summary"]))
        elif k == Kind.DECISION:
            calls = []
            self._open = {}
            words = [str(d.get("text") or "")]
            for i, action in enumerate(d["actions"]):
                if action.get("said"):  # the model's text answer: its words, not a call
                    words.append(str(action.get("prompt") or action.get("summary") or ""))
                    self._open[i] = ""
                    continue
                # the model's id for the call is the decision's number and the action's,
                # not the runtime's random call id nor a seq (which a resume moves), so a
                # replay shows the very same bytes however its activations fell
                cid = f"call_{d.get('step', ev.seq)}_{i}"
                self._open[i] = cid
                if action.get("call_id"):
                    self._ids[str(action["call_id"])] = cid
                calls.append(call_of(action, cid))
            text = "\n\n".join(w for w in words if w)
            self._add(Turn("assistant", text, calls=tuple(calls), seq=ev.seq))
        elif k == Kind.TOOL_RESULT:
            runtime_id = str(d["call_id"])
            call = self._ids.get(runtime_id, runtime_id)
            text, error = _output_text(d, call)
            if len(text) > RESULT_CAP:
                self.cut_results[call] = ev.seq  # where read_result finds the rest
            self._result(call, text, error, ev.seq)
        elif k in _OUTCOMES:
            said, failed = _OUTCOMES[k](d)
            index = d.get("action")
            target = self._ids.get(str(d.get("call_id"))) or (
                self._open.get(int(index)) if index is not None else None
            )
            if target:
                self._result(str(target), str(said), bool(failed), ev.seq)
            elif target == "" and failed:  # a text answer taken as a finish, not accepted
                self._add(Turn("user", f"Your answer was taken as the task's end, "
                               f"but it was {said}", seq=ev.seq))  # fmt: skip
        elif k in _TOLD:
            self._add(Turn("user", _TOLD[k](d), seq=ev.seq))

    def _result(self, call_id: str, text: str, error: bool, seq: int) -> None:
        if call_id in self._answered:  # a later word on a call already answered
            self._add(Turn("user", f"About your call {call_id}: {text}", seq=seq))
            return
        self._answered.add(call_id)
        self._add(Turn("tool", text, call_id=call_id, is_error=error, seq=seq))

    def _add(self, turn: Turn) -> None:
        self.turns.append(turn)
        self._send(turn)

    def _send(self, turn: Turn) -> None:
        """Place ``turn`` among what is sent. A result whose call is not in the
        conversation (compacted away, or never the model's) is not sent."""
        if turn.role == "assistant":
            # everything before a decision is in its final order now: each call
            # answered (or said not to have run), what waited placed after
            self._final += _ordered(self._tail)
            self._tail = []
            self._made.update(c.id for c in turn.calls)
        elif turn.role == "tool" and turn.call_id not in self._made:
            return
        self._tail.append(turn)

    def compact(self, through: int, summary: str) -> None:
        """Replace the turns up to journal seq ``through`` by ``summary``."""
        self.summary, self.through = summary, through
        self.turns = [t for t in self.turns if t.seq > through]
        self.lineage = object()
        self._final = [Turn("user", f"Summary of the work so far:\n{summary}")] if summary else []
        self._tail, self._made = [], set()
        for t in self.turns:
            self._send(t)

    @property
    def final(self) -> int:
        """How many of the turns :meth:`messages` returns stay as they are at every
        later step of this :attr:`lineage`."""
        return len(self._final)

    def messages(self, status: str) -> list[Turn]:
        """The turns to send: the summary, the turns (every call answered), the status."""
        return [*self._final, *_ordered(self._tail), Turn("user", status)]


def _ordered(turns: Sequence[Turn]) -> list[Turn]:
    """Each call's result right after the model's turn that made it, as providers insist:
    what the user said meanwhile waits until the calls are answered, and a call that
    never ran (its step ended before it) is answered as such."""
    out: list[Turn] = []
    waiting: list[Turn] = []
    open_calls: list[str] = []

    def close() -> None:
        out.extend(
            Turn("tool", "not run: the step ended before this call", call_id=c) for c in open_calls
        )
        open_calls.clear()
        out.extend(waiting)
        waiting.clear()

    for t in turns:
        if t.role == "assistant":
            close()
            out.append(t)
            open_calls.extend(c.id for c in t.calls)
        elif t.role == "tool" and t.call_id in open_calls:
            out.append(t)
            open_calls.remove(t.call_id)
            if not open_calls:
                close()
        elif t.role == "tool":  # the answer to a call of an earlier turn: a word about it
            waiting.append(Turn("user", f"About your call {t.call_id}: {t.text}", seq=t.seq))
        elif open_calls:
            waiting.append(t)
        else:
            out.append(t)
    close()
    return out


def _done(d: Mapping[str, Any]) -> tuple[str, bool]:
    return _DONE, False


def _reasons(d: Mapping[str, Any]) -> tuple[str, bool]:
    return "not accepted: " + "; ".join(str(r) for r in d.get("reasons", [])), True


def _sent(d: Mapping[str, Any]) -> tuple[str, bool]:
    if d.get("ok", True):
        return "delivered", False
    return str(d.get("error") or "not delivered"), True


_OUTCOMES: dict[str, Any] = {
    Kind.MEMORY_WRITTEN: _done,
    Kind.GOAL_PUSHED: _done,
    Kind.GOAL_COMPLETED: lambda d: ("goal completed: its checks passed", False),
    Kind.GOAL_REJECTED: _reasons,
    Kind.FINISH_CLAIMED: lambda d: ("finish accepted", False),
    Kind.FINISH_REJECTED: _reasons,
    Kind.INPUT_REQUESTED: lambda d: ("asked; the person's answer follows", False),
    Kind.TIMER_SET: lambda d: (f"waiting until {d.get('due_at')}", False),
    Kind.MESSAGE_SENT: _sent,
    Kind.DELEGATED: _sent,
    Kind.GOVERNANCE_REFUSED: lambda d: (f"refused: {d.get('reason', '')}", True),
    Kind.APPROVAL_REQUESTED: lambda d: ("held for a person's approval; the result follows", False),
    Kind.PROPOSAL_RECORDED: lambda d: ("recorded as a proposal for a person to accept", False),
    Kind.RESULT_READ: lambda d: (str(d.get("text", "")), False),
    Kind.FLOW_ALLOWED: lambda d: (
        ("allowed", False) if d.get("ok") else (str(d.get("error") or "refused"), True)
    ),
    Kind.QUERY_ANSWERED: lambda d: (
        (dumps({"answer": d.get("answer")}), False)
        if d.get("ok")
        else (str(d.get("error") or "the query failed"), True)
    ),
    Kind.OUTCOME_UNKNOWN: lambda d: (
        f"its outcome is unknown (the worker stopped during it); a person will say: "
        f"{d.get('reason', '')}",
        True,
    ),
    Kind.CALL_RESOLVED: lambda d: (
        f"a person resolved it as {d.get('resolution')}"
        + (f": {dumps(d['output'])}" if d.get("output") is not None else ""),
        d.get("resolution") != "done",
    ),
}
_TOLD: dict[str, Any] = {
    Kind.INPUT_RECEIVED: lambda d: f"A person says: {d['text']}",
    Kind.MESSAGE_RECEIVED: lambda d: (
        f"Message from agent {d['from']} (signature verified): {d.get('text')}"
    ),
    Kind.ANSWER_REFUSED: lambda d: f"Your answer could not be used: {d['reason']}. Call tools.",
    Kind.TIMER_FIRED: lambda d: "The time you waited for has come.",
    Kind.SCHEDULE_FIRED: lambda d: f"A scheduled run has come ({d.get('when', 'schedule')}).",
}


def status_text(spec: Mapping[str, Any], state: State) -> str:
    """What changes every step, shown last: goals, memory, notices, the step count."""
    lines = ["## Goals"]
    lines += [f"- [{g['status']}] {g['id']}: {g['description']}" for g in state.goals] or ["(none)"]
    lines += ["", "## Memory"]
    lines.append(
        json.dumps(state.memory, sort_keys=True, indent=2, ensure_ascii=False)
        if state.memory
        else "(empty)"
    )
    if state.notices:
        lines += ["", "## Notices"] + [f"- {n}" for n in state.notices]
    limit = spec.get("limits", {}).get("max_steps", "?")
    lines += ["", "## Step", f"{state.decisions + 1} of at most {limit}; "
              f"{len(state.manifest)} files in the workspace"]  # fmt: skip
    return "\n".join(lines) + "\n"


def estimate_tokens(turns: Sequence[Turn]) -> int:
    """A cheap, deterministic estimate: about four characters a token."""
    return sum(turn_chars(t) for t in turns) // 4


def turn_chars(t: Turn) -> int:
    """The characters :func:`estimate_tokens` counts for one turn."""
    return len(t.text) + sum(len(c.args_json) + 40 for c in t.calls) + 16
