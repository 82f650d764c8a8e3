"""Import rules that keep the data path one-directional (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "stead"

# package -> packages it must never import
FORBIDDEN = {
    "store": {"runtime", "models", "tools", "cli", "sandbox", "demo"},
    "tools": {"store", "runtime", "cli"},
    "models": {"store", "runtime", "tools", "cli", "sandbox"},
    "sandbox": {"runtime", "cli", "models"},
    "runtime": {"cli", "demo"},
    "integrity": {"runtime", "cli", "demo"},
    # pure decisions over state: no I/O of their own
    "governance": {"store", "runtime", "cli", "sandbox", "tools", "models", "demo"},
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
