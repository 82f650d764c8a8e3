"""Import rules that keep the data path one-directional (docs/architecture.md)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "stead"

# package -> packages it must never import
FORBIDDEN = {
    "store": {"runtime", "models", "tools", "cli", "sandbox", "demo"},
    "tools": {"store", "runtime", "cli"},
    "models": {"store", "runtime", "tools", "cli", "sandbox"},
    # a sandboxed run's side of the code cannot reach the journal
    "sandbox": {"store", "runtime", "cli", "models"},
    "runtime": {"cli", "demo", "workers", "server", "schedules", "evals"},
    # an eval drives agents as a person and a worker would: through the runtime, never
    # the command line, the server or a worker pool of its own
    "evals": {"cli", "demo", "server", "workers"},
    # schedules build on the runtime and the store's rows; workers and the server fire them
    "schedules": {"cli", "demo", "workers", "server"},
    "server": {"cli", "demo"},
    "workers": {"cli", "demo"},
    # mechanisms work through stead.ports, never through the runtime itself
    "integrity": {"runtime", "cli", "demo"},
    "snapshots": {"runtime", "cli", "demo"},
    "messaging": {"runtime", "cli", "demo"},
    "upgrades": {"runtime", "cli", "demo", "server", "workers"},
    # webhooks are delivered from the store's outbox, by whatever loop calls them
    "notify": {"runtime", "cli", "demo", "server", "workers"},
    # pure decisions over state: no I/O of their own
    "governance": {"store", "runtime", "cli", "sandbox", "tools", "models", "demo"},
    # given plain values (names, ids, counts, journaled events), never the machinery
    "telemetry": {"runtime", "cli", "store", "sandbox", "workers", "demo"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level >= 2:
                found.add(module.split(".")[0])
            elif node.level == 0 and module.startswith("stead."):
                found.add(module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("stead.")}
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_what_it_must_not(package: str) -> None:
    files = sorted((SRC / package).rglob("*.py"))
    assert files, f"no files found for {package}"
    for path in files:
        bad = imported_packages(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}"


def test_no_module_is_too_long() -> None:
    long = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if len(p.read_text(encoding="utf-8").splitlines()) > 600
    ]
    assert not long, f"split these modules (over 600 lines): {long}"


def test_the_runtime_keeps_only_the_step_loop_and_its_machinery() -> None:
    """Mechanisms live in the package that names them: ``runtime/`` stays small."""
    files = sorted((SRC / "runtime").glob("*.py"))
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in files}
    assert not {n: k for n, k in sizes.items() if k > 500}, sizes
    assert sum(sizes.values()) <= 2700, f"runtime/ has grown to {sum(sizes.values())} lines"


# -- import circles ---------------------------------------------------------------


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_only(tree: ast.AST) -> set[int]:
    """The ids of nodes under ``if TYPE_CHECKING:``: imports for annotations only."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def import_graph() -> dict[str, set[str]]:
    """Module -> the stead modules it imports when it runs (at any level, in any
    function), leaving out imports made only for type checking."""
    modules = {_module(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_only(tree)
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    found.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_import_circle_across_modules_except_for_type_checking() -> None:
    """Two modules that import each other when they run cannot be read, or moved, alone."""
    assert circles(import_graph()) == []


def test_the_circle_finder_sees_a_circle_made_inside_a_function() -> None:
    graph = import_graph()
    assert "stead.runtime.steps" in graph["stead.runtime.activation"]
    assert "stead.runtime.activation" not in graph["stead.runtime.steps"]  # type-only
    graph["stead.runtime.steps"].add("stead.runtime.activation")  # as a lazy import would
    assert ["stead.runtime.activation", "stead.runtime.steps"] in circles(graph)
