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

from .. import telemetry
from ..clock import Clock
from ..errors import ModelError
from ..governance.grants import network_grant
from ..ids import seeded_rng
from ..integrity.anchoring import Anchoring
from ..integrity.completion import Certifier, Verifier
from ..integrity.loading import spec_tools
from ..integrity.provenance import FlowTracer, journaled_output
from ..integrity.watch import Watch
from ..journal import Event, NewEvent, seal
from ..memories.access import access_for
from ..models.base import Decision, Model, RenderedContext
from ..ports import Messenger
from ..redaction import Redactor
from ..sandbox.base import Sandbox
from ..sandbox.secrets import Vault, openable
from ..sandbox.session import SandboxSession
from ..sandbox.workspace import Manifest, Quota, Workspace, diff
from ..state import State, apply_in_place
from ..store.base import AgentRecord, Batch, Lease, Store
from ..store.groupcommit import GroupCommitter
from ..tools.base import Tool, ToolContext, noted
from . import steps, toolcall
from .context import Renderer
from .governed import Governor
from .heartbeat import Heartbeats
from .leases import ensure_held, this_worker
from .leases import holder_is_dead_here as dead_here
from .limits import tool_limits

LEASE_TTL = 30.0
MAX_BUFFERED = 256
"""Flush at least every this many events, to bound what a crash can undo (and see
:data:`.steps.MAX_UNFLUSHED_SECONDS`)."""


class NoModel:
    """Stands in for a person's input, and for the spec's model until acquire builds it."""

    name = "none"

    def decide(self, context: RenderedContext) -> Decision:
        raise ModelError("a person's input never asks a model")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an activation ended."""

    state: State
    steps: int
    restored: tuple[str, ...] = ()


class Activation:
    """Runs one agent under its lease until it stops, finishes or fails."""

    def __init__(
        self,
        store: Store,
        record: AgentRecord,
        workspace: Workspace,
        model: Model | None,
        tools: Mapping[str, Tool] | None,
        clock: Clock,
        owner: str | Lease | None = None,
        lease_ttl: float = LEASE_TTL,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
        committer: GroupCommitter | None = None,
        sandbox: Sandbox | None = None,
        vault: Callable[[], Vault] | None = None,
        messenger: Messenger | None = None,
        certify: Certifier | None = None,
        rebuild_model: Callable[[State], Model] | None = None,
        heartbeats: Heartbeats | None = None,
    ) -> None:
        self.store = store
        self.record = record
        self.workspace = workspace
        # builds the model anew when a person swaps it mid-run (None: the caller's own)
        self.rebuild_model = rebuild_model
        self.model = model if model is not None else NoModel()  # None: the spec's, see acquire
        self._spec_tools = tools is None
        self.tools = dict(tools or {})
        self.clock = clock
        self._claimed = owner if isinstance(owner, Lease) else None  # taken once, by the claim
        owner = owner.owner if isinstance(owner, Lease) else owner
        self.owner = owner or f"{this_worker()}:{int(time.monotonic_ns())}"
        self.lease_ttl = lease_ttl
        self.lease: Lease | None = None
        self.state = State()
        self.renderer = Renderer(record.spec, self.tools)
        self.buffer: list[Event] = []
        self.committed_version = 0
        self.flushed_at = 0.0
        self.manifest: Manifest = {}
        self.dirty = False
        self.rng = seeded_rng(os.urandom(16).hex())
        self._seed_model()
        self._redactor: Redactor | None = None
        self._renewed_at = 0.0
        self._own_heartbeats: Heartbeats | None = None  # when no worker shares its own
        self._heartbeats = heartbeats  # a worker's, shared: then no thread of its own
        self.on_commit = on_commit
        self.committer = committer
        self.sandbox = sandbox
        # this activation's commands share one sandbox, made at the first one
        self._session: SandboxSession | None = None
        self._sandbox_deadline: float | None = None  # time.monotonic(): see lease_renewed
        self.vault = vault
        self.anchoring = Anchoring(vault)  # checked at acquire, signs every commit
        self.governor = Governor(self)
        self.messenger = messenger
        self.verifier = Verifier(self, certify)
        self.watch: Watch | None = None  # made at acquire, with the agent's tools
        self.flows = FlowTracer(partial(journaled_output, store, record.agent_id))
        self.signals_at = float("-inf")  # when people's requests were last looked for
        self.trace = telemetry.current().trace(record.agent_id, record.name, record.tenant)

    # -- lease and commits ------------------------------------------------------

    def acquire(self, force: bool = False) -> None:
        now, claimed, self._claimed = self.clock.now(), self._claimed, None
        if claimed is not None and now < claimed.expires_at - self.lease_ttl / 3:
            self.lease = claimed  # taken by the worker's claim just now: not written again
        else:
            current = self.store.get_lease(self.record.agent_id)
            takeover = None
            if current is not None and current.live(now) and (force or dead_here(current.owner)):
                takeover = current.owner
            self.lease = self.store.acquire_lease(
                self.record.agent_id, self.owner, self.lease_ttl, now, takeover=takeover
            )
        self._renewed_at = now
        try:
            self.state = self.store.load_state(self.record.agent_id)
            # its scope, journal, state row, spec and row are what was committed
            self.anchoring.check(self.store, self.record, self.state, self.lease.epoch)
            if self._spec_tools:  # only now, its spec checked, is any Python it names imported
                self.tools = spec_tools(self.store, self.record)
                self.renderer = Renderer(self.record.spec, self.tools)
            if isinstance(self.model, NoModel) and self.rebuild_model is not None:
                self.model = self.rebuild_model(self.state)  # the spec's model, checked too
                self._seed_model()
            watch = Watch(self)
            watch.prime()
            self.watch = watch
            if getattr(self.model, "conversation", False):
                self.renderer.follow(self.store, self.state)  # since its last compaction
        except BaseException:
            self.release()  # refused: the lease is given back, nothing keeps renewing it
            raise
        self.lease_renewed(self.lease)
        beats = self._heartbeats
        if beats is None:
            beats = self._own_heartbeats = Heartbeats(self.store, self.lease_ttl, self.clock)
        beats.add(self.lease, self.lease_lost, self.lease_renewed)
        self.committed_version = self.state.version
        self.manifest = dict(self.state.manifest)

    def still_held(self) -> None:
        """Before an effect: renew the lease at the time now if it may have lapsed (a
        commit can wait past it). A worker that took the agent over meanwhile has
        raised its epoch, so the renewal is refused (StaleEpoch) and nothing acts."""
        now = self.clock.now()
        if self.lease is not None and now >= self.lease.expires_at - self.lease_ttl / 3:
            self.lease = self.store.renew_lease(self.lease, self.lease_ttl, now)
            self._renewed_at = now
            self.lease_renewed(self.lease)

    def stop_heartbeat(self) -> None:
        if self._heartbeats is not None:
            self._heartbeats.discard(self.record.agent_id)
        if self._own_heartbeats is not None:
            self._own_heartbeats.close()
            self._own_heartbeats = None

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
        s = self.state  # nothing the journal keeps holds a secret (see stead.redaction)
        new = NewEvent(new.kind, self.redactor().event(new.data))
        (ev,) = seal(
            s.agent_id, s.version + 1, s.head_hash, self.clock.now(), self.lease.epoch, [new]
        )
        self.trace.observe(ev, s.approvals)  # spans and metrics (stead.telemetry)
        apply_in_place(s, ev)  # this activation owns its state object
        self.buffer.append(ev)
        self.renderer.observe(ev)
        self.flows.observe(ev)
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
            self.lease_renewed(self.lease)
        events, self.buffer = self.buffer, []
        anchor = self.anchoring.anchor(self.state, self.lease.epoch)
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
        self.flushed_at = now
        if self.on_commit is not None:
            self.on_commit(events)

    def ctx_for(
        self, call_id: str, secrets: Mapping[str, str] | None = None, tool: Tool | None = None
    ) -> ToolContext:
        if self._session is None:  # its sandbox starts at the first command, if any
            self._session = SandboxSession(self.sandbox, self.workspace.root)
            self._session.hold_until(self._sandbox_deadline)
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
            put_blob=self.workspace.blobs.put,
            note=partial(noted, self.emit),  # a tool notes only what tools may
            memories=access_for(self, tool),  # the memory tools' alone
        )

    def lease_renewed(self, lease: Lease) -> None:
        """The lease now runs to ``lease.expires_at``, and so may this activation's
        sandboxes: a little before it, by the host's monotonic clock, the sandbox
        watchdog kills them unless a later renewal moved the moment on (from any
        thread). A worker that is stopped renews nothing, so nothing it started
        writes on once another worker may have the agent."""
        left = lease.expires_at - self.clock.now()
        margin = min(self.lease_ttl / 10, 2.0)
        self._sandbox_deadline = time.monotonic() + left - margin
        if self._session is not None:
            self._session.hold_until(self._sandbox_deadline)

    def lease_lost(self) -> None:
        """Another worker has the agent now: kill this one's sandbox (from the heartbeat)."""
        if self._session is not None:
            self._session.kill()

    def idempotency_key(self, call_id: str) -> str:
        """Stable across every retry of the call, in any activation."""
        return f"{self.record.agent_id}/{call_id}"

    def redactor(self) -> Redactor:
        """Hides every secret any of this agent's tools may be given (one tool's
        secret can reach another's output through a file). Opened once per
        activation, dropped with it; one that cannot be opened is skipped."""
        if self._redactor is None:  # every shape of them derived once, here
            names = {n for t in self.tools.values() for n in t.secrets}
            found = openable(
                self.vault if names else None, self.record.tenant, self.record.agent_id, names
            )
            # and the key the model sends its provider, from the vault or the environment
            self._redactor = Redactor({**found, **getattr(self.model, "secrets", {})})
        return self._redactor

    def _seed_model(self) -> None:
        seed = getattr(self.model, "use_rng", None)  # its retries' jitter is this activation's
        if seed is not None:
            seed(self.rng)
        speak = getattr(self.model, "speak_for", None)  # its streamed text, for watchers
        if speak is not None:
            speak(self.record.agent_id, lambda text: self.redactor().text(text))

    def use_model(self, model: Model) -> None:
        """Ask ``model`` from the next decision on (a swap mid-run): its conversation
        from the journal, its key among what is redacted; the old one is closed."""
        old, self.model = self.model, model
        self._seed_model()
        self._redactor = None
        self.renderer.transcript = None
        if getattr(model, "conversation", False):
            self.renderer.follow(self.store, self.state)
        getattr(old, "close", lambda: None)()

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
        if self.watch is not None and self.watch.system({"tool": tool, **result}):
            result["system"] = True  # records a person may point at: remembered too
        return result

    def scan_delta(self, limit: Quota | None = None) -> dict[str, Any]:
        """Scan the workspace; return the delta since the last committed manifest."""
        now_manifest = self.workspace.scan(limit)
        delta = diff(self.manifest, now_manifest)
        self.manifest = now_manifest
        self.dirty = False
        return {"changed": delta.changed, "removed": delta.removed} if delta else {}

    # -- the step loop (.steps) and one tool call (.toolcall) ----------------------

    def run_steps(self, max_steps: int | None = None) -> int:
        """Run steps while the agent is running; return how many decisions were made."""
        return steps.run_steps(self, max_steps)

    def run_tool(
        self, index: int, action: dict[str, Any], authority: dict[str, Any] | None = None
    ) -> None:
        """Run one call of the in-flight decision (see :func:`.toolcall.run_tool`)."""
        toolcall.run_tool(self, index, action, authority)
