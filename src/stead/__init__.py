"""stead: a runtime that keeps long-running AI agents durable, isolated and governed.

The public API is what ``__all__`` lists; everything else may change.
"""

from .clock import Clock, FakeClock, SystemClock
from .errors import (
    ArchiveError,
    ConcurrencyError,
    ContextTooLong,
    GovernanceError,
    IntegrityError,
    InvalidAnswer,
    LeaseHeld,
    McpServerError,
    MissingExtra,
    ModelAuthError,
    ModelError,
    NotFound,
    PathEscape,
    PolicyError,
    ResolveError,
    SandboxUnavailable,
    SchemaTooNew,
    ScriptError,
    SecretError,
    SnapshotConsumed,
    SpecError,
    StaleEpoch,
    SteadError,
    StoreError,
    StoreUnusable,
    ToolError,
    UsageError,
    VersionConflict,
    WorkspaceFull,
)
from .journal import Event, Kind, verify_chain
from .models import Decision, Model, RenderedContext, ScriptedModel
from .runtime.activation import Outcome
from .runtime.runtime import Runtime
from .schedules import Schedules
from .spec import AgentSpec, load_spec, parse_spec
from .state import State
from .store import Store, open_store
from .tools import Effect, Reconciled, Tool, ToolContext, tool
from .version import __version__

__all__ = [
    "AgentSpec",
    "ArchiveError",
    "Clock",
    "ConcurrencyError",
    "ContextTooLong",
    "Decision",
    "Effect",
    "Event",
    "FakeClock",
    "GovernanceError",
    "IntegrityError",
    "InvalidAnswer",
    "Kind",
    "LeaseHeld",
    "McpServerError",
    "MissingExtra",
    "Model",
    "ModelAuthError",
    "ModelError",
    "NotFound",
    "Outcome",
    "PathEscape",
    "PolicyError",
    "Reconciled",
    "RenderedContext",
    "ResolveError",
    "Runtime",
    "SandboxUnavailable",
    "Schedules",
    "SchemaTooNew",
    "ScriptError",
    "ScriptedModel",
    "SecretError",
    "SnapshotConsumed",
    "SpecError",
    "StaleEpoch",
    "State",
    "SteadError",
    "Store",
    "StoreError",
    "StoreUnusable",
    "SystemClock",
    "Tool",
    "ToolContext",
    "ToolError",
    "UsageError",
    "VersionConflict",
    "WorkspaceFull",
    "__version__",
    "load_spec",
    "open_store",
    "parse_spec",
    "tool",
    "verify_chain",
]
