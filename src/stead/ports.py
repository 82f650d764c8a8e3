"""The seams mechanisms work through, as small protocols.

A mechanism (completion checks and certificates, monitors, rollback, keys,
hibernation, fork, export and import, messages) never takes the whole
:class:`~stead.runtime.activation.Activation` or
:class:`~stead.runtime.runtime.Runtime`: it is typed against one of these, so it
lives in the package that names it and imports nothing of ``runtime/``.

* :class:`AgentPort`: what a mechanism may do to the agent it works on during
  an activation, under that activation's lease: read its state, record and
  journal, use the clock, the activation's seeded entropy and the workspace,
  emit events and flush them (one transaction), and make a tool's context.
* :class:`RuntimePort`: what a mechanism may do from outside an activation: the
  store, the clock, the vault, the tenant's blobs and workspaces, take an
  agent's lease for a short piece of work (:meth:`RuntimePort.hold`) and append
  events as a person.
* :class:`SecretRows` and :class:`Blobs`: what the vault and the workspace need
  of a store (put and get a sealed secret; put, get and forget a blob, and its
  stored size for a snapshot's report), so that
  ``sandbox/`` imports nothing of ``store/``. ``Blobs`` is also the interface
  every blob backend implements for one tenant: the local folder, PostgreSQL
  and S3 (:mod:`stead.store.blob_url`).

Only the types are imported from the packages named here: this module is a
leaf every package may import.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .clock import Clock
    from .journal import Event, NewEvent
    from .sandbox.secrets import Vault
    from .sandbox.workspace import Manifest, Workspace
    from .state import State
    from .store.base import AgentRecord, Store
    from .tools.base import Tool, ToolContext


class SecretRows(Protocol):
    """Where the vault keeps sealed secrets: one row per (tenant, agent or tenant scope, name)."""

    def put_secret(self, tenant: str, agent_id: str, name: str, sealed: str, at: float) -> None:
        """Store (replace) one sealed secret."""

    def get_secret(self, tenant: str, agent_id: str, name: str) -> str | None:
        """The sealed secret, or None."""


class Blobs(Protocol):
    """Content-addressed storage of one tenant, that a workspace scans into and restores from.

    A tenant's blobs are its own: no digest names another tenant's content, and
    a name that is not a SHA-256 digest names nothing.
    """

    def has(self, digest: str) -> bool:
        """True when the blob with this sha256 hex digest is stored."""

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store ``data`` (once: storing it again changes nothing); return its digest."""

    def get(self, digest: str) -> bytes:
        """The blob's bytes, checked against its digest: :class:`~stead.errors.NotFound`
        if it is not stored, :class:`~stead.errors.IntegrityError` if it is damaged."""

    def stored_size(self, digest: str) -> int:
        """How many bytes the blob takes where it is stored (compressed, if it is)."""

    def forget(self, digest: str) -> None:
        """Delete the blob if it is stored: a write undone before anything named it."""


class AgentPort(Protocol):
    """The agent a mechanism works on, during one activation that holds its lease."""

    @property
    def store(self) -> Store:
        """The store, to read the agent's journal (writes go through :meth:`emit`)."""

    @property
    def record(self) -> AgentRecord: ...

    @property
    def state(self) -> State:
        """The agent's state, including everything emitted and not yet flushed."""

    @property
    def clock(self) -> Clock: ...

    @property
    def rng(self) -> random.Random:
        """This activation's seeded entropy (ids, jitter): never the global one."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def tools(self) -> Mapping[str, Tool]: ...

    @property
    def owner(self) -> str:
        """Who holds the lease (worker and process), as journaled."""

    @property
    def buffer(self) -> list[Event]:
        """The events emitted and not yet flushed, oldest first."""

    manifest: Manifest
    """The workspace manifest as of the last scan (set when a mechanism restores files)."""

    def emit(self, kind: str, **data: Any) -> Event:
        """Seal an event onto the agent's chain and fold it in, uncommitted."""

    def emit_event(self, new: NewEvent) -> Event: ...

    def flush(self) -> None:
        """Commit everything emitted so far, in one transaction."""

    def ctx_for(
        self, call_id: str, secrets: Mapping[str, str] | None = None, tool: Tool | None = None
    ) -> ToolContext:
        """The context a tool is called with for ``call_id``."""


class RuntimePort(Protocol):
    """The runtime, as a mechanism working from outside an activation sees it."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def tenant(self) -> str | None:
        """The tenant this runtime is confined to, or None (all of them)."""

    def vault(self) -> Vault:
        """The secrets vault; raises :class:`~stead.errors.SecretError` without a key."""

    def person(self) -> str:
        """Who is acting, as journaled for people's inputs."""

    def workspace(self, agent_id: str, tenant: str) -> Workspace: ...

    def blobs(self, tenant: str) -> Blobs: ...

    def tools_for(self, record: AgentRecord) -> dict[str, Tool]:
        """The tools the agent's spec names, loaded."""

    def hold(
        self, agent_id: str, tools: Mapping[str, Tool] | None = None
    ) -> AbstractContextManager[AgentPort]:
        """The agent's lease for a short piece of work that asks no model."""

    def append_as_person(self, agent_id: str, build: Callable[[State], list[NewEvent]]) -> State:
        """Append what ``build`` makes of the current state, under a short lease."""


Messenger = Callable[[AgentPort, Mapping[str, Any]], dict[str, Any]]
"""Delivers an agent's message or delegation action; returns what to journal of it
(``ok``, and ``message`` or ``error``). See :mod:`stead.messaging.delivery`."""
