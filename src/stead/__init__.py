"""stead: a runtime that keeps long-running AI agents durable, isolated and governed.

The public API is what ``__all__`` lists; everything else may change.
"""

from .clock import Clock, FakeClock, SystemClock
from .errors import (
    ConcurrencyError,
    GovernanceError,
    IntegrityError,
    LeaseHeld,
    ModelError,
    NotFound,
    PathEscape,
    PolicyError,
    ResolveError,
    SchemaTooNew,
    ScriptError,
    SpecError,
    StaleEpoch,
    SteadError,
    StoreError,
    ToolError,
    UsageError,
    VersionConflict,
)
from .journal import Event, Kind, verify_chain
from .models import Decision, Model, RenderedContext, ScriptedModel
from .runtime.activation import Outcome
from .runtime.runtime import Runtime
from .spec import AgentSpec, load_spec, parse_spec
from .state import State
from .store import Store, open_store
from .tools import Effect, Reconciled, Tool, ToolContext, tool

__version__ = "0.1.0"

__all__ = [
    "AgentSpec",
    "Clock",
    "ConcurrencyError",
    "Decision",
    "Effect",
    "Event",
    "FakeClock",
    "GovernanceError",
    "IntegrityError",
    "Kind",
    "LeaseHeld",
    "Model",
    "ModelError",
    "NotFound",
    "Outcome",
    "PathEscape",
    "PolicyError",
    "Reconciled",
    "RenderedContext",
    "ResolveError",
    "Runtime",
    "SchemaTooNew",
    "ScriptError",
    "ScriptedModel",
    "SpecError",
    "StaleEpoch",
    "State",
    "SteadError",
    "Store",
    "StoreError",
    "SystemClock",
    "Tool",
    "ToolContext",
    "ToolError",
    "UsageError",
    "VersionConflict",
    "__version__",
    "load_spec",
    "open_store",
    "parse_spec",
    "tool",
    "verify_chain",
]
