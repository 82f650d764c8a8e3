"""The runtime: one object that creates, runs, messages and repairs agents.

It ties a store, a blob store and a workspace root together. Each run of an agent
is a fresh :class:`~stead.runtime.activation.Activation` under the agent's lease;
the runtime itself keeps nothing agent-specific between calls."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..clock import Clock, SystemClock
from ..destinations import Bound
from ..errors import (
    GovernanceError,
    LeaseHeld,
    NotFound,
    ResolveError,
    SecretError,
    StaleEpoch,
    SteadError,
    ToolError,
    UsageError,
)
from ..hostpaths import keep
from ..ids import check_id, new_id
from ..integrity.certificates import certifier_for
from ..integrity.loading import sealed_tools
from ..integrity.monitors import Violation, replay
from ..integrity.provenance import Graph
from ..integrity.rollback import RollbackReport, rollback
from ..integrity.watch import monitors_for
from ..journal import Event, Kind, NewEvent
from ..messaging.delivery import messenger_for
from ..models.actions import check_tool_names
from ..models.base import Model
from ..models.registry import check_keys, effective_spec, model_for
from ..sandbox.base import Sandbox
from ..sandbox.secrets import Vault, load_key
from ..sandbox.workspace import Workspace
from ..snapshots import hibernation, lineage
from ..snapshots.hibernation import settle_wake
from ..snapshots.trust import TrustedKeys
from ..spec import AgentSpec, parse_model_field
from ..state import State
from ..store import open_store
from ..store.base import AgentRecord, Lease, SnapshotRecord, Store
from ..store.blob_url import Blobs, open_blobs
from ..store.groupcommit import GroupCommitter
from ..store.scoped import TenantStore
from ..tools.base import Tool
from ..tools.mcp.tools import check_hooks
from ..tools.registry import load_tools
from . import creation
from .activation import LEASE_TTL, Activation, NoModel, Outcome
from .authority import AuthorityActions
from .ending import EndingActions, cancelled_state
from .heartbeat import Heartbeats
from .leases import person
from .recovery import recover
from .steps import Machine, answer_inline, step_machine

RESOLUTIONS = ("done", "retry", "abort")


class Runtime(AuthorityActions, EndingActions):
    """Agents in one store; workspaces under ``data_dir``, blobs there or at ``blobs`` (a URL)."""

    def __init__(
        self,
        store: Store | str,
        data_dir: str | Path | None = None,
        clock: Clock | None = None,
        lease_ttl: float = LEASE_TTL,
        sandbox: Sandbox | None = None,
        secret_key: bytes | None = None,
        tenant: str | None = None,
        blobs: str | None = None,
    ) -> None:
        self.store = open_store(store) if isinstance(store, str) else store
        if tenant is not None:
            check_id(tenant, "tenant")  # "" is not the operator: only None is
            # everything this runtime does goes through one tenant's view
            self.store = TenantStore(self.store, tenant)
        self.tenant = tenant
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="stead-")
        self.data_dir = Path(data_dir)
        keep(self.data_dir)  # nothing is imported from it, nor a workspace seeded from it
        self.blob_backend = open_blobs(blobs, self.data_dir / "blobs")  # stead.store.blob_url
        self.clock = clock or SystemClock()
        self.lease_ttl = lease_ttl
        self.sandbox = sandbox
        self._secret_key = secret_key
        self.person = person

    def vault(self) -> Vault:
        """The secrets vault, under the key given or found in the environment."""
        if self._secret_key is None:
            # read once: the key file is not re-read for every call that needs a secret
            self._secret_key = load_key()
        return Vault(self.store, self._secret_key)

    def close(self) -> None:
        self.store.close()
        self.blob_backend.close()

    def workspace(self, agent_id: str, tenant: str) -> Workspace:
        return Workspace(self.data_dir / "workspaces" / tenant / agent_id, self.blobs(tenant))

    def blobs(self, tenant: str) -> Blobs:
        """A tenant's own blob store: no tenant can name another's content."""
        return self.blob_backend.tenant(tenant)

    # -- creating -------------------------------------------------------------

    @staticmethod
    def check_loads(spec: AgentSpec) -> None:
        """Refuse a spec whose tools or monitors cannot be loaded, before anything is stored.

        Every tool must be a built-in or a declared tool that imports, no two with
        one name, and every custom python rule must import: otherwise the agent
        would be stored only to fail on its first run, and on every worker pass.
        """
        tools = load_tools(spec.tools, [spec.base_dir])
        check_hooks(spec.to_record())  # an MCP tool's reconcile hooks import
        monitors_for(spec.to_record(), tools, strict=True)
        if spec.model_options is not None:  # offered to a provider as tools, by name
            check_tool_names(tools)

    def create(self, spec: AgentSpec, agent_id: str | None = None) -> State:
        """Create an agent from a validated spec; seed its workspace; journal it.

        Call :meth:`check_loads` first unless the caller will hand the agent its
        tools itself (``run(tools=...)``): this only checks the id.
        """
        return creation.create(self, spec, agent_id)

    # -- running --------------------------------------------------------------

    def model_key(self, record: AgentRecord) -> Callable[[str], Bound | None]:
        """Opens the vault secret holding a provider's API key (the agent's, else its
        tenant's) with the hosts it may go to; None without a vault key, so the worker's
        environment is tried."""

        def lookup(name: str) -> Bound | None:
            try:
                return self.vault().find(record.tenant, record.agent_id, name)
            except SecretError:
                return None

        return lookup

    def tools_for(self, record: AgentRecord) -> dict[str, Tool]:
        """The spec's tools, and its MCP servers' as journaled (see stead.tools.mcp), once
        the spec is found to be the agent's own (IntegrityError, importing nothing, if not)."""
        return sealed_tools(self.store, record, self.vault)

    def run(
        self,
        agent_id: str,
        *,
        model: Model | None = None,
        tools: Mapping[str, Tool] | None = None,
        max_steps: int | None = None,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
        committer: GroupCommitter | None = None,
        record_model: Path | None = None,
        owner: str | Lease | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Outcome:
        """Take the agent's lease, recover, and run it until it stops.

        ``max_steps`` bounds the decisions made in this activation (the spec's
        limit, the agent's whole life). Raises :class:`~stead.errors.LeaseHeld`
        if another live worker runs it. A ``committer`` groups its commits with
        other agents'; ``record_model`` records a provider model's exchanges to
        that file (:mod:`stead.models.recording`). Once ``stop()`` is true, it
        ends after the step it is in."""
        return answer_inline(
            self.activate(
                agent_id,
                model=model,
                tools=tools,
                max_steps=max_steps,
                on_commit=on_commit,
                committer=committer,
                record_model=record_model,
                owner=owner,
                stop=stop,
            )
        )

    def activate(
        self,
        agent_id: str,
        *,
        model: Model | None = None,
        tools: Mapping[str, Tool] | None = None,
        max_steps: int | None = None,
        on_commit: Callable[[Sequence[Event]], None] | None = None,
        committer: GroupCommitter | None = None,
        record_model: Path | None = None,
        owner: str | Lease | None = None,
        stop: Callable[[], bool] | None = None,
        heartbeats: Heartbeats | None = None,
    ) -> Machine[Outcome]:
        """:meth:`run` as a :data:`~stead.runtime.steps.Machine`, which yields where it
        waits for a model; ``heartbeats`` keeps its lease alive with others'."""
        record = self.store.get_record(agent_id)
        key = self.model_key(record)

        def build(state: State) -> Model:  # the spec's, or one a person set since
            spec = effective_spec(record.spec, state)
            return model_for(spec, key, record=record_model, requests_made=state.model_requests)

        built = model is None
        act = Activation(  # a model or tools not given are the spec's, made once it is checked
            self.store,
            record,
            self.workspace(agent_id, record.tenant),
            model,
            tools,
            self.clock,
            lease_ttl=self.lease_ttl,
            on_commit=on_commit,
            committer=committer,
            sandbox=self.sandbox,
            vault=self.vault,
            messenger=messenger_for(self),
            certify=certifier_for(self),
            rebuild_model=build if built else None,
            owner=owner,  # a worker's claim: the lease it took for this agent, used as is
            heartbeats=heartbeats,
        )
        act.acquire()
        try:
            with act.trace.activation(lambda: act.state):  # its span (stead.telemetry)
                settle_wake(act)  # a due timer fires; a woken agent's snapshot is restored
                if act.state.is_final or act.state.status == "hibernated":
                    return Outcome(act.state, 0)
                restored = recover(act, new_id("act", self.clock, act.rng))
                try:
                    steps = yield from step_machine(act, max_steps, stop)
                except StaleEpoch:  # taken from it: by a person's cancel, it ends here
                    if (ended := cancelled_state(self.store, agent_id)) is None:
                        raise
                    return Outcome(ended, 0, restored)
                return Outcome(act.state, steps, restored)
        finally:
            act.release()
            if built:  # here: its connections end with the activation
                getattr(act.model, "close", lambda: None)()

    # -- people's inputs --------------------------------------------------------

    @contextlib.contextmanager
    def hold(
        self, agent_id: str, tools: Mapping[str, Tool] | None = None, *, force: bool = False
    ) -> Iterator[Activation]:
        """The agent's lease, held for a short piece of work that asks no model.

        People's inputs, hibernation, restores and rollbacks go through the lease
        like a worker's writes, so they never interleave with a running step.
        ``tools`` are those it may call (a rollback's compensations); ``force``
        takes the lease from a live holder, whose next write is refused (a cancel).
        """
        record = self.store.get_record(agent_id)
        act = Activation(
            self.store,
            record,
            self.workspace(agent_id, record.tenant),
            NoModel(),
            tools or {},
            self.clock,
            lease_ttl=self.lease_ttl,
            sandbox=self.sandbox,
            vault=self.vault,  # to check and sign the agent's anchor, if it has a key
        )
        act.acquire(force=force)
        try:
            yield act
        finally:
            act.release()

    def append_as_person(self, agent_id: str, build: Callable[[State], list[NewEvent]]) -> State:
        """Append what ``build`` makes of the current state, under a short lease."""
        with self.hold(agent_id) as act:
            for new in build(act.state):
                act.emit_event(new)
            act.flush()
            return act.state

    def accept(self, agent_id: str, proposal_id: str) -> State:
        """Run a proposed call now, under the authority of the person accepting it.

        The proposal's call runs as its own call (its id is the proposal id),
        journaled with who accepted it; the tenant's policy still applies.
        """
        with self.hold(agent_id, self.tools_for(self.store.get_record(agent_id))) as act:
            hibernation.refuse_while_hibernated(act.state, "accept its proposal")
            proposal = act.state.proposals.get(proposal_id)
            if proposal is None:
                open_ = ", ".join(sorted(act.state.proposals)) or "none"
                raise NotFound(
                    f"agent {agent_id} has no open proposal {proposal_id}; open proposals: {open_}"
                )
            tool = act.tools.get(proposal["tool"])
            refusal = None if tool is None else act.governor.policy_denial(tool, proposal["args"])
            if refusal is not None:
                raise GovernanceError(f"the tenant's policy refuses {proposal_id}: {refusal}")
            who = self.person()
            act.emit(Kind.PROPOSAL_ACCEPTED, proposal_id=proposal_id, by=who)
            authority = {
                "decision": "allow",
                "reason": f"proposal accepted by {who}",
                "authority": who,
                "policy_version": act.governor.policy_version(),
            }
            action = {"call_id": proposal_id, "tool": proposal["tool"], "args": proposal["args"]}
            act.run_tool(-1, action, authority=authority)
            act.flush()
            return act.state

    def check(self, agent_id: str) -> tuple[list[tuple[int, Violation]], list[dict[str, Any]]]:
        """The monitors run over the stored journal, and the violations the live run journaled.

        Both lists hold the same violations, in order, unless the spec's monitors
        changed or the journal is not what ran.
        """
        record = self.store.get_record(agent_id)
        try:
            tools = self.tools_for(record)
        except ToolError:
            tools = {}  # a tool the embedding program provides; markers still show
        monitors = monitors_for(record.spec, tools)  # its version from the agent's creation
        events = list(self.store.read_events(agent_id))
        monitors.start(events[0].at)
        found = replay(events, monitors)
        journaled = [
            {k: e.data[k] for k in ("rule", "verdict", "message", "events")}
            for e in events
            if e.kind == Kind.VIOLATION
            and e.data["rule"] not in ("quarantine", "store_behind")  # not a monitor's
        ]
        return found, journaled

    def provenance(self, agent_id: str) -> Graph:
        """The provenance graph of the agent's journal (see stead.integrity.provenance)."""
        return Graph(self.store.read_events(agent_id))

    def quarantine(self, agent_id: str, seq: int, reason: str) -> tuple[str, list[int]]:
        """Mark a result as bad: it and everything downstream are flagged, the agent stops.

        Recorded as a ``violation`` of rule ``quarantine`` naming the events, so the
        agent (unless finished) waits in ``needs_attention`` and cannot finish
        until a person clears it. If a worker is running the agent, the request is
        left for it, and it stops the agent before its next step. Returns the
        agent's status (or ``"stopping"``) and the downstream events.
        """
        if not reason.strip():
            raise UsageError("a quarantine needs a reason (--reason TEXT)")
        graph = self.provenance(agent_id)
        try:
            downstream = [n.seq for n in graph.impact(seq)]
        except KeyError:
            raise NotFound(f"agent {agent_id} has no event {seq}") from None
        violation_id = new_id("vio", self.clock)
        violation: dict[str, Any] = {
            "violation_id": violation_id,
            "call_id": None,
            "rule": "quarantine",
            "verdict": "suspend",
            "message": f"event {seq} quarantined by {self.person()}: {reason}",
            "events": [seq, *downstream],
        }
        try:
            state = self.append_as_person(agent_id, lambda s: [NewEvent(Kind.VIOLATION, violation)])
        except LeaseHeld:
            self.store.post_signal(agent_id, violation_id, violation, self.clock.now())
            return "stopping", downstream
        return state.status, downstream

    def rollback(
        self,
        agent_id: str,
        *,
        to_version: int | None = None,
        downstream_of: int | None = None,
        tools: Mapping[str, Tool] | None = None,
    ) -> RollbackReport:
        """Undo what came after a version, or what depended on a result (see .rollback)."""
        return rollback(
            self, agent_id, to_version=to_version, downstream_of=downstream_of, tools=tools
        )

    # -- hibernation, forks and archives (see .hibernation and .lineage) ----------

    def hibernate(self, agent_id: str, reason: str = "requested") -> SnapshotRecord:
        """Freeze a waiting agent's workspace into a snapshot; it then costs only storage."""
        return hibernation.hibernate(self, agent_id, reason)

    def restore(self, snapshot_id: str) -> State:
        """Restore a snapshot (once ever); the agent continues from it on the next run."""
        return hibernation.restore(self, snapshot_id)

    def wake(self, agent_id: str) -> State:
        """Restore a hibernated agent's current snapshot."""
        return hibernation.wake(self, agent_id)

    def fork(
        self,
        agent_id: str,
        *,
        at_version: int | None = None,
        with_grants: bool = False,
        name: str | None = None,
    ) -> State:
        """A new agent (new id, key, workspace copy) from a past or the current version."""
        return lineage.fork(
            self, agent_id, at_version=at_version, with_grants=with_grants, name=name
        )

    def export(self, agent_id: str, path: str | Path, *, move: bool = False) -> dict[str, Any]:
        """Write the agent's signed archive; with ``move`` the source can no longer run."""
        return lineage.export(self, agent_id, Path(path), move=move)

    def import_archive(
        self,
        path: str | Path,
        *,
        with_grants: bool = False,
        trusted: TrustedKeys | None = None,
        vet: lineage.Vet = None,
    ) -> State:
        """Read an archive into this store as a new agent; with ``trusted``, only an
        archive signed by one of those exporter keys (:mod:`stead.snapshots.trust`);
        with ``vet``, only one whose spec it passes (an archive from the network)."""
        return lineage.import_archive(self, Path(path), with_grants=with_grants,
                                      trusted=trusted, vet=vet)  # fmt: skip

    def set_model(self, agent_id: str, model: Any, base_dir: Path | None = None) -> State:
        """Give the agent another model from its next decision on (journaled).

        ``model`` is what a spec's ``model`` takes; the conversation carries
        over, since it is rendered from the journal for whichever provider.
        """
        ref, script, options = parse_model_field(model, base_dir or Path.cwd())
        check_keys({"model_options": options}, self.model_key(self.store.get_record(agent_id)))
        change = {"model": ref, "model_options": options, "script": script, "by": self.person()}
        try:
            return self.append_as_person(agent_id, lambda s: [NewEvent(Kind.MODEL_CHANGED, change)])
        except LeaseHeld:  # running: its worker takes the change before its next decision
            signal = {"kind": Kind.MODEL_CHANGED.value, **change}
            self.store.post_signal(agent_id, new_id("sig", self.clock), signal, self.clock.now())
            return self.store.load_state(agent_id)

    def send(self, agent_id: str, text: str) -> State:
        """Deliver a message to an agent (it wakes if it was waiting for input)."""

        def build(state: State) -> list[NewEvent]:
            if state.is_final:
                raise SteadError(f"agent {agent_id} is {state.status}; it takes no more messages")
            return [NewEvent(Kind.INPUT_RECEIVED, {"text": text, "by": self.person()})]

        return self.append_as_person(agent_id, build)

    def resolve(self, agent_id: str, call_id: str, resolution: str) -> State:
        """A person's decision on a call whose outcome is unknown.

        ``done``: it happened; the step goes on after it. ``retry``: it did not;
        it runs again on resume. ``abort``: it is given up; the model sees it as
        failed.
        """
        if resolution not in RESOLUTIONS:
            raise ResolveError(f"--as must be one of {', '.join(RESOLUTIONS)}, not {resolution!r}")

        def build(state: State) -> list[NewEvent]:
            if call_id not in state.unknown:
                waiting = ", ".join(sorted(state.unknown)) or "none"
                raise ResolveError(
                    f"call {call_id} of agent {agent_id} is not awaiting a "
                    f"decision; calls whose outcome is unknown: {waiting}"
                )
            return [
                NewEvent(
                    Kind.CALL_RESOLVED,
                    {
                        "call_id": call_id,
                        "resolution": resolution,
                        "by": self.person(),
                        "action": state.unknown[call_id].get("action"),
                    },
                )
            ]

        return self.append_as_person(agent_id, build)
