"""Tools: the decorator, schema derivation, argument checks, loading, and the built-ins."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stead.errors import PathEscape, ToolError
from stead.tools.base import (
    Effect,
    Reconciled,
    Tool,
    ToolContext,
    as_tool,
    check_args,
    make_tool,
    schema_for,
    tool,
)
from stead.tools.builtin import BUILTINS
from stead.tools.registry import load_tool, load_tools

HERE = Path(__file__).parent
SAMPLE = "stead_sample_tools"


@pytest.fixture
def isolated_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """load_tool puts folders on sys.path and imports modules; undo both afterwards."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(HERE)])
    monkeypatch.delitem(sys.modules, SAMPLE, raising=False)
    yield
    sys.modules.pop(SAMPLE, None)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "README.md").write_text("# hi\n", encoding="utf-8")
    (ws / "src" / "app.py").write_text("print('hi')\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("not yours", encoding="utf-8")
    return ws


def ctx_for(workspace: Path, call_id: str = "c1") -> ToolContext:
    return ToolContext("ag_1", "t1", call_id, f"ag_1/{call_id}", workspace)


def run(name: str, workspace: Path, **args: Any) -> Any:
    return as_tool(BUILTINS[name]).call(args, ctx_for(workspace))


# -- the decorator and schemas -------------------------------------------------------------


def test_bare_decorator_declares_an_effectful_tool_and_returns_the_function() -> None:
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    decorated = tool(add)
    assert decorated is add
    assert add(1) == 3  # still ordinary Python
    t = as_tool(add)
    assert (t.name, t.effect, t.description, t.wants_ctx) == (
        "add",
        Effect.EFFECTFUL,
        "Add two numbers.",
        False,
    )
    assert t.call({"a": 5}, ctx_for(Path("."))) == 7


@pytest.mark.parametrize("effect", ["read_only", "idempotent", "effectful", Effect.IDEMPOTENT])
def test_effect_classes_are_accepted(effect: str | Effect) -> None:
    @tool(effect=effect, name="renamed")
    def f() -> None:
        return None

    t = as_tool(f)
    assert t.effect == Effect(effect)
    assert t.name == "renamed"


@pytest.mark.parametrize("effect", ["readonly", "pure", "", "READ_ONLY"])
def test_an_unknown_effect_is_refused(effect: str) -> None:
    with pytest.raises(ToolError, match=f"effect {effect!r} is not one of") as info:

        @tool(effect=effect)
        def f() -> None:
            return None

    assert "read_only, idempotent, effectful" in str(info.value)


def test_schema_is_derived_from_annotations() -> None:
    def f(
        s: str,
        i: int,
        x: float,
        b: bool,
        items: list[str],
        mapping: dict[str, int],
        maybe: int | None,
        anything: Any,
        untyped,
        ctx: ToolContext,
        *rest: int,
        opt: str = "d",
        **more: Any,
    ) -> None:
        return None

    schema = schema_for(f)
    assert schema == {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "items": {"type": "array"},
            "mapping": {"type": "object"},
            "maybe": {"type": ["integer", "null"]},
            "anything": {},
            "untyped": {},
            "opt": {"type": "string"},
        },
        "required": ["s", "i", "x", "b", "items", "mapping", "maybe", "anything", "untyped"],
        "additionalProperties": False,
    }
    assert make_tool(f).wants_ctx


def test_as_tool_refuses_what_is_not_a_function() -> None:
    with pytest.raises(ToolError, match="not a function"):
        as_tool(42)
    t = as_tool(BUILTINS["read_file"])
    assert as_tool(t) is t


# -- argument checks -----------------------------------------------------------------------


def _typed(s: str, i: int, x: float, flag: bool = False, anything: Any = None) -> None:
    return None


TYPED = make_tool(_typed)


@pytest.mark.parametrize(
    "args",
    [
        {"s": "a", "i": 1, "x": 1.5},
        {"s": "a", "i": -3, "x": 2},  # an int is a number
        {"s": "", "i": 0, "x": 0.0, "flag": True, "anything": {"a": [1]}},
    ],
)
def test_check_args_accepts_good_arguments(args: dict[str, Any]) -> None:
    check_args(TYPED, args)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"s": "a", "i": 1, "x": 1.0, "extra": 1}, "has no argument 'extra'; it takes s, i, x"),
        ({"s": "a", "x": 1.0}, "needs argument 'i'"),
        ({"s": 1, "i": 1, "x": 1.0}, "argument 's' must be string, got int"),
        ({"s": "a", "i": 1.0, "x": 1.0}, "argument 'i' must be integer, got float"),
        ({"s": "a", "i": True, "x": 1.0}, "argument 'i' must be integer, got bool"),
        ({"s": "a", "i": 1, "x": False}, "argument 'x' must be number, got bool"),
        ({"s": "a", "i": 1, "x": "1"}, "argument 'x' must be number, got str"),
        ({"s": "a", "i": 1, "x": 1.0, "flag": 1}, "argument 'flag' must be boolean"),
    ],
)
def test_check_args_names_the_bad_argument(args: dict[str, Any], match: str) -> None:
    with pytest.raises(ToolError, match=match):
        check_args(TYPED, args)


def test_a_tool_with_no_arguments_says_so() -> None:
    t = make_tool(lambda: None, name="noop")
    with pytest.raises(ToolError, match="it takes no arguments"):
        t.call({"x": 1}, ctx_for(Path(".")))


def test_call_checks_before_running() -> None:
    ran: list[int] = []

    @tool
    def f(n: int) -> None:
        ran.append(n)

    with pytest.raises(ToolError):
        as_tool(f).call({"n": "1"}, ctx_for(Path(".")))
    assert ran == []


# -- reconcile hooks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("done", Reconciled("done")),
        ("not_done", Reconciled("not_done")),
        (Reconciled("done", {"id": 7}), Reconciled("done", {"id": 7})),
    ],
)
def test_reconcile_answers(answer: str | Reconciled, expected: Reconciled) -> None:
    t = make_tool(lambda: None, name="pay", reconcile=lambda args, ctx: answer)
    assert t.ask_reconcile({}, ctx_for(Path("."))) == expected


def test_no_reconcile_hook_means_unknown() -> None:
    assert make_tool(lambda: None, name="pay").ask_reconcile({}, ctx_for(Path("."))) == (
        Reconciled("unknown")
    )


def test_a_reconcile_hook_with_a_bad_verdict_is_an_error() -> None:
    t = make_tool(lambda: None, name="pay", reconcile=lambda args, ctx: "probably")
    with pytest.raises(ToolError, match="answered 'probably'"):
        t.ask_reconcile({}, ctx_for(Path(".")))


# -- loading ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "effect"),
    [
        ("read_file", Effect.READ_ONLY),
        ("list_files", Effect.READ_ONLY),
        ("write_file", Effect.IDEMPOTENT),
        ("shell", Effect.EFFECTFUL),
    ],
)
def test_load_builtin_tools(name: str, effect: Effect) -> None:
    t = load_tool(name)
    assert isinstance(t, Tool)
    assert (t.name, t.effect) == (name, effect)
    assert t.wants_ctx
    assert "ctx" not in t.schema["properties"]


def test_load_a_user_tool_by_module_and_function(isolated_imports: None, tmp_path: Path) -> None:
    greet = load_tool(f"{SAMPLE}:say_hello", [HERE])
    assert (greet.name, greet.effect) == ("greet", Effect.IDEMPOTENT)
    assert greet.schema["required"] == ["name"]
    assert greet.call({"name": "ann", "times": 2}, ctx_for(tmp_path)) == (
        "hello ann from ag_1 hello ann from ag_1"
    )
    # a function handed over in Python is still an effectful tool ...
    plain = as_tool(sys.modules[SAMPLE].plain)
    assert (plain.name, plain.effect, plain.wants_ctx) == ("plain", Effect.EFFECTFUL, False)
    assert plain.call({"x": 1}, ctx_for(tmp_path)) == 2
    # ... but a spec names only declared tools: os:system would run on the host
    for ref in (f"{SAMPLE}:plain", "os:system", "subprocess:run"):
        with pytest.raises(ToolError, match="not declared as a tool"):
            load_tool(ref, [HERE])
    charge = load_tool(f"{SAMPLE}:charge", [HERE])
    assert charge.ask_reconcile({"amount": 3.5}, ctx_for(tmp_path)) == Reconciled(
        "done", {"charged": 3.5}
    )


def test_load_tool_imports_from_the_search_path_only(isolated_imports: None) -> None:
    with pytest.raises(ToolError, match="cannot import"):
        load_tool(f"{SAMPLE}:charge")
    assert load_tool(f"{SAMPLE}:charge", [HERE]).name == "charge"


def test_load_tools_keys_by_name(isolated_imports: None) -> None:
    tools = load_tools(["read_file", f"{SAMPLE}:say_hello", f"{SAMPLE}:charge"], [HERE])
    assert sorted(tools) == ["charge", "greet", "read_file"]


def test_load_tools_refuses_two_tools_with_one_name(isolated_imports: None) -> None:
    with pytest.raises(ToolError, match="two tools are named 'read_file'"):
        load_tools(["read_file", f"{SAMPLE}:shadow"], [HERE])


@pytest.mark.parametrize(
    ("ref", "match"),
    [
        (
            "rm_rf",
            "unknown tool 'rm_rf': built-in tools are list_files, read_file, "
            "recall_memories, save_memory, shell",
        ),
        ("stead_no_such_module_xyz:f", "cannot import module 'stead_no_such_module_xyz'"),
        (f"{SAMPLE}:missing", f"module '{SAMPLE}' has no 'missing'"),
        (f"{SAMPLE}:NOT_A_TOOL", "not declared as a tool"),
    ],
)
def test_load_tool_errors(isolated_imports: None, ref: str, match: str) -> None:
    with pytest.raises(ToolError, match=match):
        load_tool(ref, [HERE])


# -- built-ins stay in the workspace -----------------------------------------------------------


def test_read_file(workspace: Path) -> None:
    assert run("read_file", workspace, path="src/app.py") == "print('hi')\n"
    with pytest.raises(FileNotFoundError, match=r"no file 'nope\.txt'"):
        run("read_file", workspace, path="nope.txt")
    with pytest.raises(FileNotFoundError):
        run("read_file", workspace, path="src")  # a folder is not a file


def test_write_file_creates_folders_and_replaces_whole(workspace: Path) -> None:
    out = run("write_file", workspace, path="new/deep/file.txt", content="héllo")
    assert out == {"path": "new/deep/file.txt", "bytes": 6}
    assert (workspace / "new/deep/file.txt").read_text(encoding="utf-8") == "héllo"
    run("write_file", workspace, path="new/deep/file.txt", content="x")
    assert (workspace / "new/deep/file.txt").read_text(encoding="utf-8") == "x"
    assert sorted(os.listdir(workspace / "new/deep")) == ["file.txt"]  # no temp file left


def test_list_files(workspace: Path) -> None:
    assert run("list_files", workspace) == ["README.md", "src/app.py"]
    assert run("list_files", workspace, path=".") == ["README.md", "src/app.py"]
    assert run("list_files", workspace, path="src") == ["src/app.py"]


def test_list_files_through_a_symlinked_workspace_path(workspace: Path, tmp_path: Path) -> None:
    # the workspace folder may be reached through a symlink (e.g. /tmp on macOS)
    alias = tmp_path / "alias"
    os.symlink(workspace, alias)
    assert run("list_files", alias) == ["README.md", "src/app.py"]


@pytest.mark.parametrize("name", ["read_file", "write_file", "list_files"])
@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "src/../../secret.txt", "out"])
def test_builtins_refuse_paths_outside_the_workspace(
    workspace: Path, tmp_path: Path, name: str, path: str
) -> None:
    os.symlink(tmp_path, workspace / "out")  # a link leading out of the workspace
    args: dict[str, Any] = {"path": path}
    if name == "write_file":
        args["content"] = "pwned"
    with pytest.raises(PathEscape):
        run(name, workspace, **args)
    assert (tmp_path / "secret.txt").read_text(encoding="utf-8") == "not yours"


def test_write_file_cannot_write_through_a_symlinked_file(workspace: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "secret.txt", workspace / "innocent.txt")
    with pytest.raises(PathEscape):
        run("write_file", workspace, path="innocent.txt", content="pwned")
    assert (tmp_path / "secret.txt").read_text(encoding="utf-8") == "not yours"


def test_shell_runs_in_the_workspace_with_a_scrubbed_environment(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEAD_TEST_SECRET", "hunter2")
    out = run("shell", workspace, command='pwd; echo "[$HOME]"; echo "[$STEAD_TEST_SECRET]"')
    assert out["exit_code"] == 0
    lines = out["stdout"].splitlines()
    assert lines == ["/workspace", "[/workspace]", "[]"], "inside the sandbox, at /workspace"
    assert run("shell", workspace, command="exit 3")["exit_code"] == 3


def test_an_optional_argument_admits_null() -> None:
    def f(limit: int | None, name: str) -> None:
        return None

    t = make_tool(f)
    check_args(t, {"limit": None, "name": "x"})
    with pytest.raises(ToolError, match="must be integer"):
        check_args(t, {"limit": "3", "name": "x"})
    with pytest.raises(ToolError, match="must be string"):
        check_args(t, {"limit": 1, "name": None})
