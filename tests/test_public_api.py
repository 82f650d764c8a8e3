"""The curated public API: adding or removing a name is a deliberate act.

The same holds for ``stead.testing``, and for the exception tree: every error
class is defined in stead/errors.py, derives from SteadError, and is drawn in
that module's docstring exactly where it sits, public or marked (internal).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import stead
import stead.errors
import stead.testing

SRC = Path(stead.__file__).parent

EXPECTED = {
    "AgentSpec",
    "ArchiveError",
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
    "McpServerError",
    "MissingExtra",
    "Model",
    "ContextTooLong",
    "InvalidAnswer",
    "ModelAuthError",
    "ModelError",
    "NotFound",
    "Outcome",
    "PathEscape",
    "Reconciled",
    "RenderedContext",
    "PolicyError",
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
}

TESTING_EXPECTED = {
    "EventCapture",
    "FakeClock",
    "ScriptedModel",
    "scripted",
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


def test_testing_all_is_exactly_its_public_api() -> None:
    assert set(stead.testing.__all__) == TESTING_EXPECTED


def test_every_name_stead_testing_exports_exists() -> None:
    for name in stead.testing.__all__:
        assert hasattr(stead.testing, name), name


# -- the exception tree -------------------------------------------------------------

_TREE_LINE = re.compile(r"^(?P<indent>(?:│   |    )*)(?:├── |└── )(?P<name>\w+)\s+(?P<what>.+)$")


def _drawn_tree() -> list[tuple[str, str, bool]]:
    """(class, parent, internal) for every class errors.py's docstring draws, in order."""
    doc = stead.errors.__doc__ or ""
    lines = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert lines[0].strip() == "SteadError", lines[0]
    drawn = [("SteadError", "Exception", False)]
    parents = ["SteadError"]
    for line in lines[1:]:
        m = _TREE_LINE.match(line.removeprefix("    "))
        assert m, f"not a line of the tree: {line!r}"
        depth = len(m["indent"]) // 4
        del parents[depth + 1 :]
        drawn.append((m["name"], parents[depth], m["what"].endswith("(internal)")))
        parents.append(m["name"])
    return drawn


def _defined_in_errors() -> list[type[BaseException]]:
    return [
        v
        for v in vars(stead.errors).values()
        if isinstance(v, type) and issubclass(v, BaseException) and v.__module__ == "stead.errors"
    ]


def test_the_docstring_tree_is_the_class_tree() -> None:
    """Same classes, same parents, same order as they are defined."""
    defined = []
    for cls in _defined_in_errors():
        assert len(cls.__bases__) == 1, f"{cls.__name__} has more than one base"
        defined.append((cls.__name__, cls.__bases__[0].__name__))
    assert [(name, parent) for name, parent, _ in _drawn_tree()] == defined


def test_every_error_is_a_stead_error() -> None:
    for cls in _defined_in_errors():
        assert issubclass(cls, stead.errors.SteadError), cls


def test_every_drawn_error_is_public_unless_marked_internal() -> None:
    exported = {
        n for n in stead.__all__ if isinstance(getattr(stead, n), type)
        and issubclass(getattr(stead, n), BaseException)
    }  # fmt: skip
    drawn = _drawn_tree()
    assert {name for name, _, internal in drawn if not internal} == exported
    for name, _, internal in drawn:
        if internal:
            assert name not in stead.__all__, name


def _stead_modules() -> list[str]:
    names = [
        info.name
        for info in pkgutil.walk_packages(stead.__path__, "stead.")
        if info.name != "stead.__main__"  # importing it runs the command line
    ]
    assert "stead.integrity.monitor_config" in names and "stead.demo.runner" in names
    return names


def test_no_module_defines_an_error_of_its_own() -> None:
    """Every exception class under src/stead is defined in errors.py (so it is drawn in
    the tree and derives from SteadError), but for a module's private signal."""
    for module_name in _stead_modules():
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, BaseException)):
                continue
            if not value.__module__.startswith("stead."):
                continue  # imported from elsewhere (the standard library, say)
            name = value.__name__
            if name.endswith("Error"):
                assert issubclass(value, stead.errors.SteadError), f"{module_name}.{name}"
            if value.__module__ != "stead.errors":
                assert name.startswith("_") and not name.endswith("Error"), (
                    f"{value.__module__}.{name}: define it in stead/errors.py"
                )


def test_no_error_class_is_defined_outside_errors_py() -> None:
    """The same, by the source text: a class ``...Error`` nested in a function counts too."""
    project = SRC / "demo" / "project"  # the demo agent's data, not stead's code
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "errors.py" or project in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                assert not node.name.endswith("Error"), (
                    f"{path.relative_to(SRC)}: {node.name} belongs in stead/errors.py"
                )
