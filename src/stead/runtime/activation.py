"""One activation: a worker holding an agent's lease and running its steps.

An activation is the only thing that writes an agent's journal while it runs.
It is created per run, owns everything agent-specific it touches (workspace
handle, random generator, buffered events), and is dropped when it ends, so
nothing of one agent survives into the next one a worker runs.

When events are committed (:meth:`Activation.flush`):

1. before a tool that is not ``read_only`` runs: its intent, together with the
   decision it came from and everything emitted before it (the previous step's
   results, memory writes and end), in one transaction;
2. right after an ``effectful`` tool returns: its result, so the window in
   which a crash leaves an effect's outcome unknown is the call itself;
3. when the activation stops (finished, waiting, needs attention, limit), and
   whenever 256 events or a second have gone by without a commit.

So an agent whose steps each make one idempotent call commits once per step.
A decision is never acted on before it is committed, except by ``read_only``
tools, and nothing is lost but work that can be redone: a crash undoes at most
the uncommitted tail (decisions not yet acted on are asked for again; read-only
and idempotent calls run again with the same idempotency key).

A crash between any two points leaves a state that :mod:`.recovery` can finish
without asking the model again or repeating an effect.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..canonical import dumps
from ..clock import Clock
from ..errors import ModelError, SecretError, ToolError
from ..governance.grants import network_grant
from ..governance.ledger import LEDGER_KINDS, verify_ledger
from ..ids import new_id, seeded_rng
from ..integrity.anchoring import Anchoring
from ..integrity.provenance import FlowTracer
from ..journal import Event, Kind, NewEvent, seal
from ..models.base import Model
from ..sandbox.base import Sandbox
from ..sandbox.redaction import Redactor
from ..sandbox.secrets import Vault, openable
from ..sandbox.session import SandboxSession
from ..sandbox.workspace import Manifest, Workspace, diff
from ..state import State, apply_in_place
from ..store.base import AgentRecord, Batch, Lease, Store
from ..tools.base import Effect, Tool, ToolContext
from .completion import Certifier, Verifier
from .context import Renderer
from .governed import Governor, Messenger, is_escalation
from .groupcommit import GroupCommitter
from .heartbeat import Heartbeat
from .leases import ensure_held, holder_is_dead_here, this_worker
from .limits import settle_workspace, tool_limits
from .watch import Watch

LEASE_TTL = 30.0
MAX_BUFFERED = 256
"""Flush at least every this many events, to bound what a crash can undo."""
MAX_UNFLUSHED_SECONDS = 1.0
"""...and before asking the model once this long has passed since the last flush."""
MAX_RESULT_CHARS = 64 * 1024
SIGNAL_SECONDS = 0.5
"""How often a running activation looks for people's requests (a quarantine)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an activation ended."""

    state: State
    steps: int
    restored: tuple[str, ...] = ()


def jsonable(value: Any) -> Any:
    """A tool's return value as JSON, cut to a bounded size."""
    try:
        text = dumps(value)
    except (TypeError, ValueError):
        value, text = repr(value), dumps(repr(value))
    if len(text) > MAX_RESULT_CHARS:
        return {"truncated": True, "text": text[:MAX_RESULT_CHARS]}
    return value


class Activation:
    """Runs one agent under its lease until it stops, finishes or fails."""

    def __init__(
        self,
        store: Store,
        record: AgentRecord,
        workspace: Workspace,
        model: Model,
        tools: Mapping[str, Tool],
        clock: Clock,
        owner: str | None = None,
        lease_ttl: float = LEASE_TTL,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
        committer: GroupCommitter | None = None,
        sandbox: Sandbox | None = None,
        vault: Callable[[], Vault] | None = None,
        messenger: Messenger | None = None,
        certify: Certifier | None = None,
    ) -> None:
        self.store = store
        self.record = record
        self.workspace = workspace
        self.model = model
        self.tools = dict(tools)
        self.clock = clock
        self.owner = owner or f"{this_worker()}:{int(time.monotonic_ns())}"
        self.lease_ttl = lease_ttl
        self.lease: Lease | None = None
        self.state = State()
        self.renderer = Renderer(record.spec, self.tools)
        self.buffer: list[Event] = []
        self.committed_version = 0
        self._flushed_at = 0.0
        self.manifest: Manifest = {}
        self.dirty = False
        self.rng = seeded_rng(os.urandom(16).hex())
        self._redactor: Redactor | None = None
        self._renewed_at = 0.0
        self._heartbeat: Heartbeat | None = None
        self.on_commit = on_commit
        self.committer = committer
        self.sandbox = sandbox
        # this activation's commands share one sandbox, made at the first one
        self._session: SandboxSession | None = None
        self.vault = vault
        self.anchoring = Anchoring(vault)  # checked at acquire, signs every commit
        self.governor = Governor(self)
        self.messenger = messenger
        self.verifier = Verifier(self, certify)
        self.watch: Watch | None = None  # made at acquire, with the agent's tools
        self.flows = FlowTracer()
        self._signals_at = float("-inf")

    # -- lease and commits ------------------------------------------------------

    def acquire(self) -> None:
        now = self.clock.now()
        current = self.store.get_lease(self.record.agent_id)
        takeover = None
        if current is not None and current.live(now) and holder_is_dead_here(current.owner):
            takeover = current.owner
        self.lease = self.store.acquire_lease(
            self.record.agent_id, self.owner, self.lease_ttl, now, takeover=takeover
        )
        self._renewed_at = now
        try:
            self.state = self.store.load_state(self.record.agent_id)
            # the scope the agent acts under must be the one its journal gives
            verify_ledger(
                self.state, self.store.read_events_of_kinds(self.record.agent_id, LEDGER_KINDS)
            )
            self.anchoring.check(self.store, self.state)  # journal and row are what was committed
            watch = Watch(self)
            watch.prime()
            self.watch = watch
        except BaseException:
            self.release()  # refused: the lease is given back, nothing keeps renewing it
            raise
        self._heartbeat = Heartbeat(
            self.store, self.lease, self.lease_ttl, self.clock, on_lost=self.lease_lost
        ).start()
        self.committed_version = self.state.version
        self.manifest = dict(self.state.manifest)

    def stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def release(self) -> None:
        if self._session is not None:
            self._session.close()  # nothing it ran outlives the lease
            self._session = None
        self.stop_heartbeat()
        if self.lease is not None:
            self.store.release_lease(self.lease)
            self.lease = None

    def emit(self, kind: str, **data: Any) -> Event:
        return self.emit_event(NewEvent(kind, data))

    def emit_event(self, new: NewEvent) -> Event:
        """Seal an event onto the chain and fold it into the state, uncommitted.

        ``self.state`` always includes everything emitted; the store holds it
        only after :meth:`flush`. Anything not yet flushed is lost if the worker
        dies, which is why :meth:`flush` is called before every effect.
        """
        assert self.lease is not None
        s = self.state  # nothing the journal keeps holds a secret (see .sandbox.redaction)
        new = NewEvent(new.kind, self.redactor().event(new.data))
        (ev,) = seal(
            s.agent_id, s.version + 1, s.head_hash, self.clock.now(), self.lease.epoch, [new]
        )
        apply_in_place(s, ev)  # this activation owns its state object
        self.buffer.append(ev)
        if self.watch is not None:
            self.watch.observe(ev)
        if len(self.buffer) >= MAX_BUFFERED:
            self.flush()
        return ev

    def flush(self) -> None:
        """Commit everything emitted so far, in one transaction."""
        if not self.buffer:
            return
        assert self.lease is not None
        now = self.clock.now()
        if now - self._renewed_at > self.lease_ttl / 3:
            self.lease = self.store.renew_lease(self.lease, self.lease_ttl, now)
            self._renewed_at = now
        events, self.buffer = self.buffer, []
        anchor = self.anchoring.anchor(self.state)
        if self.committer is not None:
            self.committer.submit(
                Batch(events, self.state, self.committed_version, self.lease.epoch, anchor)
            )
        else:
            self.store.append(
                events,
                self.state,
                expected_version=self.committed_version,
                epoch=self.lease.epoch,
                at=now,
                anchor=anchor,
            )
        self.committed_version = self.state.version
        self._flushed_at = now
        if self.on_commit is not None:
            self.on_commit(events)

    def ctx_for(
        self, call_id: str, secrets: Mapping[str, str] | None = None, tool: Tool | None = None
    ) -> ToolContext:
        if self._session is None:  # its sandbox starts at the first command, if any
            self._session = SandboxSession(self.sandbox, self.workspace.root)
        return ToolContext(
            agent_id=self.record.agent_id,
            tenant=self.record.tenant,
            call_id=call_id,
            idempotency_key=self.idempotency_key(call_id),
            workspace=self.workspace.root,
            sandbox=self._session,
            secrets=secrets or {},
            env={n: os.environ[n] for n in (tool.env if tool else ()) if n in os.environ},
            # checked now, at the call, like every other grant
            network=network_grant(self.state.grants, self.clock.now()) is not None,
            **tool_limits(self.record.spec),
            fencing_token=self.lease.epoch if self.lease else None,
            lease_check=partial(ensure_held, self.store, self.lease) if self.lease else None,
        )

    def lease_lost(self) -> None:
        """Another worker has the agent now: kill this one's sandbox (from the heartbeat)."""
        if self._session is not None:
            self._session.kill()

    def idempotency_key(self, call_id: str) -> str:
        """Stable across every retry of the call, in any activation."""
        return f"{self.record.agent_id}/{call_id}"

    def secrets_for(self, t: Tool) -> dict[str, str]:
        """The secrets ``t`` declared, opened for this one call (never stored)."""
        if not t.secrets:
            return {}
        if self.vault is None:
            raise SecretError(f"tool {t.name} needs secrets but this runtime has no vault")
        return self.vault().for_call(self.record.tenant, self.record.agent_id, t.secrets)

    def redactor(self) -> Redactor:
        """Hides every secret any of this agent's tools may be given (one tool's
        secret can reach another's output through a file). Opened once per
        activation, dropped with it; one that cannot be opened is skipped."""
        if self._redactor is None:  # every shape of them derived once, here
            names = {n for t in self.tools.values() for n in t.secrets}
            self._redactor = Redactor(openable(
                self.vault if names else None, self.record.tenant, self.record.agent_id, names
            ))  # fmt: skip
        return self._redactor

    def as_recorded(
        self, tool: str, result: dict[str, Any], given: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """A tool's result as the journal keeps it: every secret of the agent's and of
        ``given`` (this call's) redacted, and marked ``tainted`` if the data-flow rule
        must remember it past a restart. (:meth:`emit` redacts it again, harmlessly:
        redaction is idempotent, and a secret the tool was given must go first.)"""
        r = self.redactor()
        if given and not given.items() <= r.secrets.items():
            r = Redactor({**r.secrets, **given})
        if "output" in result:
            result = {**result, "output": r.value(result["output"])}
        if "error" in result:
            result = {**result, "error": r.text(result["error"])}
        if self.watch is not None and self.watch.taints({"tool": tool, **result}):
            result["tainted"] = True  # the state names it, so a restart remembers it
        return result

    def scan_delta(self, limit: int | None = None) -> dict[str, Any]:
        """Scan the workspace; return the delta since the last committed manifest."""
        now_manifest = self.workspace.scan(limit)
        delta = diff(self.manifest, now_manifest)
        self.manifest = now_manifest
        self.dirty = False
        return {"changed": delta.changed, "removed": delta.removed} if delta else {}

    # -- the step loop ------------------------------------------------------------

    def run_steps(self, max_steps: int | None = None) -> int:
        """Run steps while the agent is running; return how many decisions were made."""
        limit = int(self.record.spec.get("limits", {}).get("max_steps", 1000))
        made = 0
        while self.state.status == "running":
            if self.state.inflight is None:
                if max_steps is not None and made >= max_steps:
                    break
                if self.state.steps_completed >= limit:
                    self.emit(
                        Kind.STATUS_CHANGED,
                        status="failed",
                        reason=f"reached the spec's limit of {limit} steps without finishing",
                    )
                    self.flush()
                    break
                if not self.decide():
                    break
                made += 1
            self.execute_inflight()
        if self.watch is not None:
            self.watch.end_session()  # committed with the activation's last events
        self.flush()
        return made

    def take_signals(self) -> None:
        """Journal what people asked for while this worker held the lease (a quarantine).

        Looked for at most every :data:`SIGNAL_SECONDS`, so a request stops a
        running agent within about that long, without a query on every step.
        """
        now = self.clock.now()
        if now - self._signals_at < SIGNAL_SECONDS:
            return
        self._signals_at = now
        waiting = self.store.signals(self.record.agent_id)
        if not waiting:
            return
        open_ = set(self.state.violations)
        for signal_id, violation in waiting:
            if signal_id not in open_:  # not already journaled before a crash
                self.emit(Kind.VIOLATION, **violation)
        self.flush()
        self.store.drop_signals(self.record.agent_id, [sid for sid, _ in waiting])

    def decide(self) -> bool:
        if self.buffer and self.clock.now() - self._flushed_at > MAX_UNFLUSHED_SECONDS:
            self.flush()
        self.take_signals()
        if self.state.status != "running":
            return False
        context = self.renderer.render(self.state)
        try:
            decision = self.model.decide(context)
        except ModelError as exc:
            self.emit(
                Kind.STATUS_CHANGED,
                status="needs_attention",
                reason=f"model {self.model.name} gave no decision: {exc}",
            )
            self.flush()
            return False
        actions = []
        for action in decision.to_json():
            if action["type"] in ("tool", "message", "delegate"):
                action = {**action, "call_id": new_id("call", self.clock, self.rng)}
            actions.append(action)
        self.emit(
            Kind.DECISION,
            step=self.state.decisions + 1,
            context_hash=context.hash,
            model=self.model.name,
            actions=actions,
            # provenance: the results this decision's context showed
            context_events=[c["seq"] for c in self.state.recent_calls if "seq" in c],
            **self._usage(decision.usage),
        )
        # not flushed yet: it is committed with the first intent, before any effect.
        # A monitor may have suspended the agent on this very decision (a budget it
        # crosses): then none of its actions run until a person clears that.
        return self.state.status == "running"

    def _usage(self, usage: Mapping[str, float] | None) -> dict[str, Any]:
        """The decision's reported cost, with the agent's running totals (for budgets)."""
        if not usage:
            return {}
        tokens = float(usage.get("tokens", 0))
        spend = float(usage.get("spend", 0))
        totals = self.state.usage
        return {
            "usage": {
                "tokens": tokens,
                "spend": spend,
                "total_tokens": totals.get("tokens", 0) + tokens,
                "total_spend": totals.get("spend", 0) + spend,
            }
        }

    def execute_inflight(self) -> None:
        inflight = self.state.inflight
        assert inflight is not None
        actions: list[dict[str, Any]] = inflight["actions"]
        for index in range(inflight["next"], len(actions)):
            action = actions[index]
            kind = action["type"]
            if kind == "tool":
                self.run_tool(index, action)
            elif kind == "remember":
                self.emit(Kind.MEMORY_WRITTEN, action=index, values=action["values"])
            elif kind == "push_goal":
                self.emit(
                    Kind.GOAL_PUSHED,
                    action=index,
                    id=action["id"],
                    description=action.get("description", ""),
                )
            elif kind == "complete_goal":
                self.verifier.complete_goal(index, action["id"])
            elif kind == "finish":
                # a claim: accepted only if it is true now (see .completion)
                self.verifier.finish(index, action.get("summary", ""))
            elif kind == "wait_for_input":
                self.emit(Kind.INPUT_REQUESTED, action=index, prompt=action.get("prompt", ""))
            elif kind == "wait":
                due = action["until"] if "until" in action else self.clock.now() + action["seconds"]
                self.emit(
                    Kind.TIMER_SET,
                    action=index,
                    timer_id=new_id("tmr", self.clock, self.rng),
                    due_at=float(due),
                    reason=action.get("reason", ""),
                )
            elif is_escalation(kind):
                self.governor.refuse_escalation(index, action)
            elif kind in ("message", "delegate"):
                self.send(index, action)
            if self.state.status == "waiting" and self.state.waiting_for == "approval":
                return  # the step goes on from this action once a person has answered
            if self.state.status == "needs_attention":
                return  # suspended by a monitor: the rest waits until a person clears it
        step_delta = self.scan_delta() if self.dirty else {}
        self.emit(Kind.STEP_COMPLETED, step=inflight["step"], **step_delta)

    def run_tool(
        self, index: int, action: dict[str, Any], authority: dict[str, Any] | None = None
    ) -> None:
        """Run one call of the in-flight decision, if the gate allows it now.

        ``authority`` is a verdict already given by a person (an accepted
        proposal); the call then runs under it instead of asking the gate.
        """
        call_id, name, args = action["call_id"], action["tool"], action.get("args", {})
        # an intent already committed means an earlier activation died during this call
        rerun = call_id in self.state.pending
        t = self.tools.get(name)
        result_of = {"action": index, "call_id": call_id, "tool": name, "args": args}
        if t is None:
            self.emit(
                Kind.TOOL_RESULT,
                **result_of,
                ok=False,
                error=f"unknown tool {name!r}; available tools: "
                f"{', '.join(sorted(self.tools)) or 'none'}",
            )
            return
        # provenance: the decision the call came from, the results that fed it
        inflight = self.state.inflight or {}
        origin = {
            "provenance": {
                "decision": inflight.get("seq") if index >= 0 else None,
                "flows_from": self.flows.flows_from(args, self.state.recent_calls),
            }
        }
        # authority is checked now, at the moment of action, not when decided; a
        # rerun of an interrupted call was authorised when its intent was recorded
        shown: dict[str, Any] = {}
        if authority is not None:
            shown = {"verdict": authority}
        elif not rerun:
            verdict = self.governor.judge(t, call_id, args)
            if verdict.decision != "allow":
                self.governor.hold(index, result_of, verdict)
                return
            shown = {"verdict": verdict.to_json()}
            net = network_grant(self.state.grants, self.clock.now())
            if net is not None:
                shown["verdict"]["network"] = net  # its commands may reach the network
            if self.watch is not None and self.watch.monitors.rules:
                at, found = self.watch.check(call_id, name, args, verdict.approval is not None)
                shown["verdict"]["monitored"] = at  # `stead check` asks again from here
                stopping = [v for v in found if v.verdict in ("block", "suspend")]
                if stopping:
                    # no grant use and no approval is spent on a call that did not run
                    blocked = {**shown["verdict"], "decision": "blocked"}
                    self.emit(
                        Kind.TOOL_RESULT,
                        **result_of,
                        ok=False,
                        refused=True,
                        blocked=stopping[0].rule,
                        error=f"blocked by monitor {stopping[0].rule}: {stopping[0].message}",
                        verdict=blocked,
                    )
                    return
        if t.effect is not Effect.READ_ONLY and not rerun:
            self.emit(
                Kind.TOOL_INTENT,
                **result_of,
                effect=t.effect.value,
                idempotency_key=self.idempotency_key(call_id),
                **shown,
                **origin,
            )
            self.flush()
            shown, origin = {}, {}
        self.dirty = True
        self.redactor()  # the vault opened before the tool runs: it cannot fail after
        secrets: dict[str, str] = {}
        unset = ""  # why the tool's secrets could not be given: the operator's to fix
        try:
            try:
                secrets = self.secrets_for(t)
            except SecretError as exc:
                unset = str(exc)
                raise
            output = t.call(args, self.ctx_for(call_id, secrets, t))
            result: dict[str, Any] = {"ok": True, "output": jsonable(output)}
        except Exception as exc:  # a tool's failure is the model's to see, not a crash
            result = {"ok": False, "error": _describe(exc)}
        result = self.as_recorded(name, result, secrets)
        secrets.clear()
        result, delta = settle_workspace(self, t, result)
        if rerun:
            origin = {}  # recorded with its intent
        self.emit(Kind.TOOL_RESULT, **result_of, rerun=rerun, **result, **delta, **shown, **origin)
        if unset:
            # not the model's mistake: stop, so a person fixes the vault and resumes
            self.emit(
                Kind.STATUS_CHANGED,
                status="needs_attention",
                reason=f"tool {name} could not be given its secrets: {unset}; fix that, "
                f"then `stead resume {self.record.agent_id}`",
            )
        if t.effect is Effect.EFFECTFUL:
            # an effect that cannot be safely repeated: shrink the window in which
            # a crash would leave its outcome unknown to this one call
            self.flush()

    def send(self, index: int, action: dict[str, Any]) -> None:
        """A message or delegation to another agent, committed before it leaves."""
        kind = Kind.DELEGATED if action["type"] == "delegate" else Kind.MESSAGE_SENT
        if self.messenger is None:
            self.emit(
                kind,
                action=index,
                call_id=action["call_id"],
                to=action["to"],
                ok=False,
                error="this runtime cannot deliver messages between agents",
            )
            return
        self.flush()  # a crash after delivery re-sends the same message id: a replay, refused
        outcome = self.messenger(self, action)
        self.emit(kind, action=index, call_id=action["call_id"], to=action["to"], **outcome)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ToolError | FileNotFoundError | PermissionError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
