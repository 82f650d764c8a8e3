"""What a person needs to decide on an approval, beyond the call itself.

:func:`explain` adds to a pending approval (as
:meth:`~stead.runtime.authority.Authority.pending_approvals` lists it):

* ``agent``: the agent's name and its task (its first goal, else the first
  line of its instructions);
* ``why``: what the model wrote beside the call (the decision's text), if
  anything: its own words on why it makes the call;
* ``origins``: where each argument came from: ``person`` (values a person
  gave: the instructions, the goals, their messages), ``result`` (copied from
  the results named in ``from``, each with its tool, and ``untrusted`` where
  the data-flow rule judged them so), or ``model`` (neither);
* ``change``: what the call changes, where stead can tell: for ``write_file``,
  a unified diff of the workspace's file as it is against the new content,
  clipped to :data:`DIFF_LINES` lines;
* ``asked_at``, ``waited`` (seconds) and ``valid``: the policy version the
  request holds for (a new policy version makes it lapse: the call is asked
  again) and whether it still does.

Everything here is text from the model or from tools: hostile. The page
escapes it (Jinja's autoescape, and :func:`stead.summaries.shown` for what a
terminal would obey); the CLI writes it through ``shown`` too.
"""

from __future__ import annotations

import difflib
import posixpath
from collections.abc import Mapping
from typing import Any

from ..journal import Kind
from ..state import State
from ..store.base import AgentRecord, Store
from ..values import values
from .provenance import FlowTracer, journaled_output

DIFF_LINES = 80
"""How many lines of a write's diff are shown; the rest is said to be cut."""
TEXT_CAP = 2000
"""How many characters of the model's words are shown."""


def task_of(spec: Mapping[str, Any]) -> str:
    """An agent's task in a line: its first goal's description, else its instructions'."""
    for goal in spec.get("goals") or []:
        if isinstance(goal, Mapping) and goal.get("description"):
            return str(goal["description"])[:300]
    lines = str(spec.get("instructions") or "").strip().splitlines()
    return lines[0][:300] if lines else ""


def explain(
    store: Store,
    blobs: Any,
    agent_id: str,
    approval: Mapping[str, Any],
    now: float,
    policy_version: int,
    known: tuple[AgentRecord, State] | None = None,
) -> dict[str, Any]:
    """``approval`` with what a person needs to decide on it (see the module);
    ``known``: the agent's record and state, where the caller has them."""
    record, state = known or (store.get_record(agent_id), store.load_state(agent_id))
    args = approval.get("args") if isinstance(approval.get("args"), Mapping) else {}
    asked_at = float(approval.get("requested_at") or now)
    held = int(approval.get("policy_version") or 0)
    return {
        **approval,
        "agent": {"id": agent_id, "name": record.name, "task": task_of(record.spec)},
        "why": _why(store, agent_id, state, str(approval.get("call_id"))),
        "origins": _origins(store, agent_id, state, record.spec, args or {}, approval),
        "change": _change(blobs, state, str(approval.get("tool")), args or {}),
        "asked_at": asked_at,
        "waited": max(0.0, now - asked_at),
        "valid": {"policy_version": held, "now": policy_version, "holds": held == policy_version},
    }


def _why(store: Store, agent_id: str, state: State, call_id: str) -> str:
    """The text of the decision that made the call (the in-flight one while it waits)."""
    seq = (state.inflight or {}).get("seq")
    if not seq:
        return ""
    for ev in store.read_events(agent_id, int(seq), int(seq)):
        if ev.kind == Kind.DECISION and any(
            a.get("call_id") == call_id for a in ev.data.get("actions", [])
        ):
            return str(ev.data.get("text") or "")[:TEXT_CAP]
    return ""


def _person_values(spec: Mapping[str, Any], state: State) -> set[str]:
    given: list[Any] = [spec.get("instructions"), list(state.inbox)]
    given += [g.get("description") for g in spec.get("goals") or [] if isinstance(g, Mapping)]
    return values(given)


def _origins(
    store: Store,
    agent_id: str,
    state: State,
    spec: Mapping[str, Any],
    args: Mapping[str, Any],
    approval: Mapping[str, Any],
) -> dict[str, dict[str, Any]]:
    judged = (approval.get("provenance") or {}).get("args") or {}
    tools = {int(c["seq"]): str(c.get("tool")) for c in state.recent_calls if c.get("seq")}
    tracer = FlowTracer(lambda seq: journaled_output(store, agent_id, seq))
    person = _person_values(spec, state)

    def fed(seqs: list[int]) -> list[dict[str, Any]]:
        return [{"seq": s, "tool": tools.get(s, "")} for s in seqs]

    out: dict[str, dict[str, Any]] = {}
    for name, value in args.items():
        source = judged.get(name) or {}
        if source.get("source") == "untrusted":
            seqs = [int(s) for s in source.get("from", [])]
            out[str(name)] = {"source": "result", "untrusted": True, "from": fed(seqs)}
            continue
        seqs = tracer.flows_from({str(name): value}, state.recent_calls)
        found = values(value)
        if source.get("source") == "trusted" or (found and found <= person):
            out[str(name)] = {"source": "person"}
        elif seqs:
            out[str(name)] = {"source": "result", "untrusted": False, "from": fed(seqs)}
        else:
            out[str(name)] = {"source": "model"}
    return out


def _change(blobs: Any, state: State, tool: str, args: Mapping[str, Any]) -> str | None:
    """A diff of what a file write would change, or None where stead cannot tell."""
    path, content = args.get("path"), args.get("content")
    if tool != "write_file" or not isinstance(path, str) or not isinstance(content, str):
        return None
    rel = posixpath.normpath(path.lstrip("/")).removeprefix("./")
    digest = state.manifest.get(rel)
    before = ""
    if digest:  # only a file the manifest names: a path is never opened on the host
        try:
            before = blobs.get(digest).decode("utf-8", "replace")
        except Exception:
            return f"(the current {rel} could not be read; the new content is in the arguments)"
    lines = list(
        difflib.unified_diff(
            before.splitlines(), content.splitlines(),
            f"a/{rel}" if digest else "/dev/null", f"b/{rel}", lineterm="",
        )
    )  # fmt: skip
    if not lines:
        return f"(no change: {rel} already holds this content)"
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"… {len(lines) - DIFF_LINES} more lines of the diff"]
    return "\n".join(lines)


def origin_text(origin: Mapping[str, Any]) -> str:
    """One argument's origin in words, for the page and the terminal."""
    if origin.get("source") == "person":
        return "a person's value"
    if origin.get("source") == "result":
        where = ", ".join(f"{f['tool'] or 'a tool'} (event {f['seq']})" for f in origin["from"])
        return (
            "UNTRUSTED: the result of " if origin.get("untrusted") else "the result of "
        ) + where
    return "the model's own"


def waited_text(seconds: float) -> str:
    """How long an approval has waited, in words."""
    seconds = int(seconds)
    if seconds < 60:
        return plural(seconds, "second")
    if seconds < 3600:
        return plural(seconds // 60, "minute")
    if seconds < 86400:
        return plural(seconds // 3600, "hour")
    return plural(seconds // 86400, "day")


def plural(n: int, word: str) -> str:
    """``1 step``, ``2 steps``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def explained(
    rt: Any, pending: list[tuple[str, dict[str, Any]]]
) -> list[tuple[str, dict[str, Any]]]:
    """Each of ``pending`` (agent id, approval) explained, for a runtime ``rt``."""
    now = rt.clock.now()
    out = []
    versions: dict[str, int] = {}
    agents: dict[str, tuple[AgentRecord, State]] = {}  # several approvals of one agent
    for agent_id, approval in pending:
        if agent_id not in agents:
            agents[agent_id] = (rt.store.get_record(agent_id), rt.store.load_state(agent_id))
        tenant = agents[agent_id][0].tenant
        if tenant not in versions:
            policy = rt.store.get_policy(tenant)
            versions[tenant] = policy.version if policy is not None else 0
        explanation = explain(rt.store, rt.blobs(tenant), agent_id, approval, now,
                              versions[tenant], agents[agent_id])  # fmt: skip
        out.append((agent_id, explanation))
    return out
