"""Every error stead raises on purpose, in one tree.

::

    SteadError
    ├── UsageError                a command was given something it cannot use
    │   ├── MissingExtra          an optional part is used without the extra that brings it
    │   └── WebhookRefused        a webhook's address is not one it may be sent to  (internal)
    ├── SpecError                 an agent spec is invalid (names the field)
    │   └── MonitorConfigError    a spec's monitors: section cannot be built  (internal)
    ├── ScriptError               a scripted model's decision list is invalid
    ├── NotFound                  no such agent, version, call or blob
    ├── StoreError                the store cannot do what was asked
    │   ├── StoreUnusable         no store there, or a file that is not a usable stead store
    │   ├── SchemaTooNew          the database was written by a newer stead
    │   ├── ConcurrencyError      another writer got there first
    │   │   ├── StaleEpoch        an append under a lease that has been taken over
    │   │   └── VersionConflict   an append based on an out-of-date version
    │   ├── LeaseHeld             another live worker holds the agent's lease
    │   └── SnapshotConsumed      a snapshot was already restored (or is being restored)
    ├── IntegrityError            the journal's hash chain or a blob does not verify
    │   └── ArchiveError          an archive or snapshot is corrupt, truncated, tampered
    ├── ToolError                 a tool is unknown, mis-declared or mis-called
    │   ├── PathEscape            a path leaves the agent's workspace
    │   ├── WorkspaceFull         a call would take the workspace past its quota
    │   ├── SandboxUnavailable    no sandbox here, and no opt-in to run without one
    │   └── McpServerError        an MCP server did not start, died, hung, or sent too much
    ├── SecretError               the vault key or a secret is missing or wrong
    ├── GovernanceError           a grant, approval, delegation or message is invalid
    │   └── PolicyError           a policy does not parse, or cannot be evaluated
    ├── ModelError                a model could not produce a decision
    │   ├── InvalidAnswer         an answer that cannot be acted on (shown back to the model)
    │   ├── ModelAuthError        the model service refused the API key (401, 403)
    │   └── ContextTooLong        the request is longer than the model's window
    ├── ResolveError              a person's resolution does not fit the call
    └── DemoError                 ``stead demo`` could not stage its crash  (internal)

Every class drawn here is defined in this module and exported from ``stead``,
except those marked (internal): they never reach a caller of the library
(``MonitorConfigError`` becomes a :class:`SpecError` naming the field; only the
``stead demo`` command meets ``DemoError``), so they may change. No other module
defines an exception class but for a private signal it raises and catches itself
(its name starts with ``_``). tests/test_public_api.py holds this drawing, the
classes below and ``stead.__all__`` to each other.

Every message says what went wrong and what to do about it. Errors raised while
an agent runs are recorded in its journal as well as raised, so nothing that
happened is known only to a log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class SteadError(Exception):
    """The root of every error stead raises on purpose."""


class UsageError(SteadError):
    """A command or call was given input it cannot use (a bad URL, a bad option)."""


class MissingExtra(UsageError):
    """An optional part of stead is used without the package extra that brings it."""


class WebhookRefused(UsageError):
    """A webhook's URL resolves to an address it may not be sent to (loopback, private,
    metadata...) or asks for plain http:// outside the networks the operator allows;
    recorded as the delivery attempt's error, never raised to a library caller."""


class SpecError(SteadError):
    """An agent spec is invalid; the message names the field and what is allowed."""


class MonitorConfigError(SpecError):
    """A spec's ``monitors:`` section cannot be built; the message names the field.

    Internal: the spec parser and the runtime turn it into a :class:`SpecError`.
    """


class ScriptError(SteadError):
    """A scripted model's YAML decision list is invalid."""


class NotFound(SteadError):
    """The agent, version, call or blob asked for does not exist."""


class StoreError(SteadError):
    """The store cannot do what was asked."""


class StoreUnusable(StoreError):
    """The store URL names no store (for a command that only reads), or a file that is
    not a stead database: damaged, another program's, locked or read-only."""


class SchemaTooNew(StoreError):
    """The database records a schema version newer than this stead understands."""


class ConcurrencyError(StoreError):
    """Another writer changed the agent first; nothing of this write was stored."""


class StaleEpoch(ConcurrencyError):
    """The append was made under a lease epoch that has since been superseded."""


class VersionConflict(ConcurrencyError):
    """The append expected a version that is no longer the agent's latest."""


class LeaseHeld(StoreError):
    """Another live worker holds the agent's lease."""


class SnapshotConsumed(StoreError):
    """The snapshot was restored already, or is being restored: a snapshot is restored once."""


class IntegrityError(SteadError):
    """Stored data does not match its hash; ``seq`` names the event, if one."""

    def __init__(self, message: str, *, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq


class ArchiveError(IntegrityError):
    """An archive or snapshot is corrupt, truncated, tampered with, or of an unknown format."""


class ToolError(SteadError):
    """A tool is unknown, wrongly declared, or called with bad arguments."""


class PathEscape(ToolError):
    """A path given to a workspace tool resolves outside the agent's workspace."""


class WorkspaceFull(ToolError):
    """A call would take the agent's workspace past its quota (``limits.workspace_mb``)."""


class SandboxUnavailable(ToolError):
    """No sandbox can be made on this machine and the operator has not opted out."""


class McpServerError(ToolError):
    """An MCP server failed: it did not start, exited, hung past its time, sent more
    than a message may hold, or answered what cannot be used. The message ends with
    the tail of the server's stderr."""


class SecretError(SteadError):
    """The vault key is missing or wrong, or a secret a tool needs is not set."""


class GovernanceError(SteadError):
    """A grant, approval, autonomy change, delegation or signed message is invalid."""


class PolicyError(GovernanceError):
    """A policy's text does not parse, so it was not stored."""


class ModelError(SteadError):
    """A model could not produce a decision for the rendered context.

    ``attempts`` are the HTTP requests a provider's model made before it gave
    up (journaled with the failure); empty for a model that makes none.
    """

    def __init__(self, message: str, *, attempts: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.attempts = list(attempts)


class InvalidAnswer(ModelError):
    """The model answered with nothing the runtime can act on: text and no tool
    call, an unknown tool, or arguments that do not fit the tool's schema.

    The runtime journals the answer (``answer``) and shows the reason to the
    model in its next context; after the model's limit of such answers in a row
    the agent stops in ``needs_attention``.
    """

    def __init__(
        self,
        message: str,
        *,
        answer: Mapping[str, Any] | None = None,
        attempts: Sequence[Any] = (),
        usage: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(message, attempts=attempts)
        self.answer = dict(answer) if answer is not None else None
        self.usage = dict(usage) if usage is not None else None


class ModelAuthError(ModelError):
    """The model service refused the API key (HTTP 401 or 403): a person must fix it."""


class ContextTooLong(ModelError):
    """The model service says the request is longer than the model's context window."""


class ResolveError(SteadError):
    """A person's resolution does not apply to the named call."""


class DemoError(SteadError):
    """``stead demo`` could not stage its crash. Internal: only that command meets it."""
