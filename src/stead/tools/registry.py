"""Finding tools by name or by import path ``module:function``."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ToolError
from ..hostpaths import check_import_folder, check_module
from .base import Tool, as_tool, declared_tool
from .builtin import BUILTINS


def load_tool(ref: str, search_path: Iterable[str | Path] = ()) -> Tool:
    """Load one tool: a built-in name, or ``package.module:function``.

    Folders in ``search_path`` (the spec's own folder, typically) are put on
    ``sys.path`` first, so a spec can name tools in a module beside it.
    """
    if ref in BUILTINS:
        return as_tool(BUILTINS[ref])
    if ":" not in ref:
        raise ToolError(
            f"unknown tool {ref!r}: built-in tools are "
            f"{', '.join(sorted(BUILTINS))}; others are named module:function"
        )
    obj = import_object(ref, search_path, "tool")
    # A spec names only functions declared as tools: any other function (os:system,
    # say) has no effect class, no schema and no sandbox, and would run on the host.
    declared = declared_tool(obj)
    if declared is None:
        raise ToolError(
            f"tool {ref!r} is not declared as a tool; a spec names built-in tools or "
            "functions decorated with @stead.tool(effect=...)"
        )
    return declared


def import_object(ref: str, search_path: Iterable[str | Path] = (), what: str = "object") -> Any:
    """The object ``module:name`` names, with ``search_path`` folders importable first.

    Never from a data folder (:mod:`stead.hostpaths`): neither is put on ``sys.path``,
    and a module that would be loaded from one is refused before it runs. A spec
    without a folder (one from the network) has ``""`` as its folder: nothing is
    added then (on ``sys.path``, ``""`` would be the current folder)."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ToolError(f"{what} {ref!r}: write it as module:function, e.g. mypkg.tools:upload")
    folders = [str(folder) for folder in search_path if str(folder)]
    for folder in folders:
        check_import_folder(folder, f"{what} {ref!r}")
    for folder in folders:
        if folder not in sys.path:
            sys.path.insert(0, folder)
    check_module(module_name, f"{what} {ref!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a module that fails as it imports is the spec's problem too
        raise ToolError(
            f"{what} {ref!r}: cannot import module {module_name!r} ({exc}); "
            "check the name and that it is importable"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ToolError(f"{what} {ref!r}: module {module_name!r} has no {attr!r}") from None


def load_tools(refs: Iterable[Any], search_path: Iterable[str | Path] = ()) -> dict[str, Tool]:
    """Load every tool a spec names, keyed by tool name; refuse duplicate names.

    A ref is a name or ``module:function``, or ``{"tool": REF, "secrets": [...]}``
    to give a tool (``shell``, say) secrets its own declaration does not name.
    """
    tools: dict[str, Tool] = {}
    paths = list(search_path)
    for ref in refs:
        if isinstance(ref, dict):
            t = load_tool(ref["tool"], paths)
            extra = tuple(n for n in ref.get("secrets", []) if n not in t.secrets)
            env = tuple(n for n in ref.get("env", []) if n not in t.env)
            t = dataclasses.replace(t, secrets=t.secrets + extra, env=t.env + env)
        else:
            t = load_tool(ref, paths)
        if t.name in tools:
            raise ToolError(
                f"two tools are named {t.name!r}; give one another name with @stead.tool(name=...)"
            )
        tools[t.name] = t
    return tools
