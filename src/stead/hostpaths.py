"""The host's folders that stead keeps to itself: data folders, and the vault key.

A data folder holds the store, every tenant's blobs and every agent's
workspace, and agents write into their workspaces. So nothing stead imports
by name may come from one: a folder under a data folder on ``sys.path`` (or a
module that resolves into one through any folder already there) would let a
file an agent wrote run in the worker or the server as the host's user. And a
folder a spec seeds a workspace from may not hold a data folder (it would
copy every tenant's data, and itself, into the workspace) or the vault key.

Every :class:`~stead.runtime.runtime.Runtime` registers its data folder here
(:func:`keep`) when it is made, so the import guard knows every data folder
of the process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .errors import SpecError, ToolError
from .sandbox.secrets import KEY_FILE_ENV

_KEPT: set[Path] = set()


def real(path: str | Path) -> Path:
    """``path`` made absolute, with every link in it followed."""
    return Path(os.path.realpath(path))


def keep(data_dir: str | Path) -> None:
    """Register a data folder: nothing is imported from it, and no spec seeds from it."""
    _KEPT.add(real(data_dir))


def kept() -> list[Path]:
    """Every data folder registered in this process."""
    return sorted(_KEPT)


def within(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or lies beneath it (both real paths)."""
    return path == root or root in path.parents


def check_import_folder(folder: str | Path, what: str) -> None:
    """Refuse to put ``folder`` on the import path: it is a data folder, or lies in
    one (a workspace, say). A folder that holds one may be on it (a project's folder
    holds ``.stead``): :func:`check_module` refuses any module found inside."""
    where = real(folder)
    for root in kept():
        if within(where, root):
            raise ToolError(
                f"{what}: the folder it is imported from, {folder}, is or lies in stead's "
                f"data folder {root}, where agents write files; keep specs and their Python "
                "in a folder of their own, outside every data folder"
            )


def _locations(spec: Any) -> list[str]:
    found = [spec.origin] if spec.origin and spec.has_location else []
    return found + list(spec.submodule_search_locations or [])


def _find(name: str, path: list[str] | None) -> Any:
    """The module spec of ``name``, found as the import system would, without
    running any of its code (its packages are not imported to find it)."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__spec__", None)
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            return spec
    return None


def check_module(name: str, what: str) -> None:
    """Refuse a dotted module name that the import system would load (itself or
    one of its packages) from a data folder, before anything of it runs."""
    path: list[str] | None = None
    parts = name.split(".")
    for i in range(len(parts)):
        spec = _find(".".join(parts[: i + 1]), path)
        if spec is None:
            return  # the import fails by itself, with its own message
        for place in _locations(spec):
            inside = next((root for root in kept() if within(real(place), root)), None)
            if inside is not None:
                raise ToolError(
                    f"{what}: module {name!r} would be imported from {place}, in stead's data "
                    f"folder {inside}, where agents write files; name a module installed "
                    "or kept beside the spec, outside every data folder"
                )
        path = list(spec.submodule_search_locations or [])
        if not path:
            return


def check_seed(folder: str, data_dir: str | Path, field: str = "workspace") -> None:
    """Refuse a folder to seed a workspace from that is, lies in or holds a data
    folder, or holds the vault key's file."""
    where = real(folder)
    for root in {real(data_dir), *kept()}:
        if within(where, root) or within(root, where):
            raise SpecError(
                f"spec field '{field}': {folder} {'lies in' if within(where, root) else 'holds'}"
                f" stead's data folder {root} (the store, every tenant's blobs and "
                "workspaces); seed the workspace from a folder of its own"
            )
    key_file = os.environ.get(KEY_FILE_ENV)
    if key_file and within(real(key_file), where):
        raise SpecError(
            f"spec field '{field}': {folder} holds the vault key's file (${KEY_FILE_ENV}); "
            "seed the workspace from a folder that does not"
        )


def unlinked(folder: Path, field: str = "workspace") -> Path:
    """``folder`` (absolute, made of the names a spec wrote) if no part of it is a
    symbolic link; a link would make the spec read wherever the link points."""
    written = Path(os.path.abspath(folder))
    if real(written) != written:
        raise SpecError(
            f"spec field '{field}': {folder} goes through a symbolic link (it is "
            f"{real(written)}); name the folder itself"
        )
    return written
