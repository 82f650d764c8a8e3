"""Reading specs, scripts and policies from outside: bounded, plain and UTF-8.

A spec or script is input a person (or an attacker) hands to stead, so it is
read under limits before anything is stored: the file must be a regular file
of at most :data:`MAX_FILE_BYTES`, in UTF-8; the YAML may nest at most
:data:`MAX_DEPTH` levels and, with every alias expanded, hold at most
:data:`MAX_EXPANDED` nodes and characters (an alias bomb is refused before it
is built, not after it has filled memory and the journal); a mapping may not
name a key twice. What it holds must be plain JSON data: text (valid Unicode,
no lone surrogates), finite numbers, booleans, null, lists and mappings with
text keys; ``.nan``, ``.inf``, ``!!binary``, ``!!set`` and the like are refused.

Booleans are YAML 1.2's ``true`` and ``false`` only: ``off``, ``no`` or ``on``
are text, so ``probing: {off: true}`` means what it says. Dates are text too.

Every refusal is raised as the error class the caller names (a
:class:`~stead.errors.SpecError` for a spec, a
:class:`~stead.errors.ScriptError` for a script), one line, saying what to fix.
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from . import storefiles
from .errors import SteadError

MAX_FILE_BYTES = 1024 * 1024
"""The largest spec, script or policy file read (1 MiB)."""
MAX_DEPTH = 64
"""How deep lists and mappings may nest."""
MAX_EXPANDED = 2_000_000
"""Nodes plus characters of a document with every alias expanded."""

_BOOL = "tag:yaml.org,2002:bool"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


class _Resolver(yaml.resolver.Resolver):
    """YAML 1.1's implicit types without its many booleans and its timestamps."""


_Resolver.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL, _TIMESTAMP)]
    for first, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}
_Resolver.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    yaml.constructor.SafeConstructor,
    _Resolver,
):
    """A safe loader that bounds nesting and refuses a key given twice."""

    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        _Resolver.__init__(self)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"it nests deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):  # else the base class says what is wrong
            seen: set[str] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    if key_node.value in seen:
                        line = key_node.start_mark.line + 1
                        raise _Refused(
                            f"the key {key_node.value!r} is given twice (line {line}); "
                            "keep one of them"
                        )
                    seen.add(key_node.value)
        return super().construct_mapping(node, deep)


class _Refused(Exception):
    """Internal: why a document was refused; re-raised as the caller's error."""


def read_text(path: str | Path, what: str, error: type[SteadError]) -> str:
    """The UTF-8 text of a regular file of at most :data:`MAX_FILE_BYTES`."""
    p = Path(path)
    if storefiles.is_held(p):  # opened and closed here, it would drop the store's locks
        raise error(f"{what} {p} is a file of the store this process has open; name another")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"cannot read {what} {p}: {exc.strerror}") from None
    except ValueError:  # a NUL in the path
        raise error(f"cannot read {what} {str(p)!r}: the path holds a NUL") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {p} is not a regular file; name a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise error(f"cannot read {what} {p}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise error(f"{what} {p} is larger than {MAX_FILE_BYTES // 1024} KiB; make it smaller")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {p} is not UTF-8 text (byte {exc.start} cannot be read); save it as UTF-8"
        ) from None


YamlPath = tuple[str | int, ...]
"""Where a value is in a document: its keys and list indices from the top."""
Lines = dict[YamlPath, tuple[int, int]]
"""Each value's line and column (from 1) by its path; a mapping's value is placed at
its key, so a field is found where its name is written."""


def load_yaml(text: str, what: str, error: type[SteadError]) -> Any:
    """One YAML document of plain data, within the limits above; else ``error``."""
    return _load(text, what, error)[0]


def load_yaml_lines(text: str, what: str, error: type[SteadError]) -> tuple[Any, Lines]:
    """:func:`load_yaml`'s data, with where each value of it is written (:data:`Lines`)."""
    data, node = _load(text, what, error)
    lines: Lines = {}
    if node is not None:
        _place(node, (), _mark(node), lines)
    return data, lines


def _place(node: Node, path: YamlPath, at: tuple[int, int], lines: Lines) -> None:
    """Record ``at`` for ``path`` and the places of everything under ``node``.

    Aliases are walked again at each place they are used: the document's size
    with aliases expanded is bounded already (:data:`MAX_EXPANDED`), and merge
    keys (``<<``) were flattened into their mapping when it was constructed."""
    stack = [(node, path, at)]
    while stack:
        node, path, at = stack.pop()
        lines[path] = at
        if isinstance(node, SequenceNode):
            stack.extend((item, (*path, i), _mark(item)) for i, item in enumerate(node.value))
        elif isinstance(node, MappingNode):
            stack.extend(
                (value, (*path, str(key.value)), _mark(key))
                for key, value in node.value
                if isinstance(key, ScalarNode)
            )


def _mark(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _load(text: str, what: str, error: type[SteadError]) -> tuple[Any, Node | None]:
    if len(text) > MAX_FILE_BYTES:
        raise error(f"{what} is larger than {MAX_FILE_BYTES // 1024} KiB; make it smaller")
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # the reader refuses control characters already here
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_expanded(node)
        data = loader.construct_document(node)
    except _Refused as exc:
        raise error(f"{what} is refused: {exc}") from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise error(f"{what} is not valid YAML: {problem}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise error(f"{what} is not valid YAML: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()
    try:
        _check_plain(data)
    except _Refused as exc:
        raise error(f"{what} is refused: {exc}") from None
    return data, node


def _check_expanded(root: Node) -> None:
    """Refuse a node graph whose aliases expand past :data:`MAX_EXPANDED`.

    Aliases are the same node object, so each node's expanded size is computed
    once (children before parents), however often it is referred to. An anchor
    names its node before the node's children are read, so a node can hold
    itself (``a: &a [*a]``), which would expand for ever: refused.
    """
    sizes: dict[int, int] = {}
    sizing: set[int] = set()  # nodes whose children are still being sized
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, ScalarNode):
            sizes[id(node)] = 1 + len(str(node.value))
            continue
        kids: list[Node] = []
        if isinstance(node, SequenceNode):
            kids = list(node.value)
        elif isinstance(node, MappingNode):
            kids = [n for pair in node.value for n in pair]
        if not children_done:
            if id(node) in sizing:
                raise _Refused(
                    "an alias refers to a list or mapping that holds it; "
                    "write it out without the recursion"
                )
            sizing.add(id(node))
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in sizes)
            continue
        sizing.discard(id(node))
        total = 1 + sum(sizes[id(k)] for k in kids)
        if total > MAX_EXPANDED:
            raise _Refused(
                f"with its aliases expanded it is larger than {MAX_EXPANDED:,} nodes and "
                "characters; write it out without so many aliases"
            )
        sizes[id(node)] = total


def _check_plain(data: Any, where: str = "") -> None:
    """Refuse anything that is not plain JSON data (see the module docstring)."""
    if data is None or isinstance(data, bool | int):
        return
    here = where or "the top level"
    if isinstance(data, float):
        if not math.isfinite(data):
            raise _Refused(f"{here} is {data!r}; use a finite number")
        return
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused(f"{here} holds a lone surrogate, which is not text") from None
        return
    if isinstance(data, list):
        for i, item in enumerate(data):
            _check_plain(item, f"{where}[{i}]")
        return
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                raise _Refused(f"{here} has the key {key!r}; keys must be text")
            _check_plain(key, here)
            _check_plain(value, f"{where}.{key}" if where else key)
        return
    raise _Refused(
        f"{here} is a {type(data).__name__}; use text, numbers, true/false, lists and mappings"
    )
