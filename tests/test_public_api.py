"""The curated public API: adding or removing a name is a deliberate act."""

from __future__ import annotations

import stead

EXPECTED = {
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
    "Reconciled",
    "RenderedContext",
    "PolicyError",
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
}


def test_all_is_exactly_the_public_api() -> None:
    assert set(stead.__all__) == EXPECTED


def test_every_exported_name_exists() -> None:
    for name in stead.__all__:
        assert hasattr(stead, name), name


def test_every_error_derives_from_stead_error() -> None:
    errors = [
        getattr(stead, n)
        for n in stead.__all__
        if isinstance(getattr(stead, n), type)
        and n.endswith(("Error", "Epoch", "Conflict", "Held", "Found", "New", "Escape"))
    ]
    assert len(errors) >= 14
    for cls in errors:
        assert issubclass(cls, stead.SteadError), cls
