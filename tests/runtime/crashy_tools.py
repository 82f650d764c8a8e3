"""Tools whose behaviour tests control through module-level switches."""

from __future__ import annotations

from pathlib import Path

from stead import Reconciled, ToolContext, tool


class WorkerDied(BaseException):
    """Raised inside a tool to stand in for the worker process dying there.

    It derives from BaseException, like a real interruption, so the runtime
    neither catches it as a tool error nor gets to record a result.
    """


CALLS: list[tuple[str, str]] = []
DIE_IN: set[str] = set()
RECONCILE_ANSWER: dict[str, str] = {"answer": "done"}


def reset() -> None:
    CALLS.clear()
    DIE_IN.clear()
    RECONCILE_ANSWER["answer"] = "done"


def _run(name: str, ctx: ToolContext, write: bool = True) -> dict[str, str]:
    CALLS.append((name, ctx.idempotency_key))
    if write:
        (Path(ctx.workspace) / f"{name}.out").write_text(ctx.idempotency_key, encoding="utf-8")
    if name in DIE_IN:
        DIE_IN.discard(name)
        raise WorkerDied(name)
    return {"did": name}


@tool(effect="effectful")
def plain(ctx: ToolContext) -> dict[str, str]:
    return _run("plain", ctx)


def _reconcile(args: dict[str, object], ctx: ToolContext) -> Reconciled | str:
    answer = RECONCILE_ANSWER["answer"]
    return Reconciled("done", {"found": True}) if answer == "done" else answer


@tool(effect="effectful", reconcile=_reconcile)
def reconciled(ctx: ToolContext) -> dict[str, str]:
    return _run("reconciled", ctx)


@tool(effect="idempotent")
def idem(ctx: ToolContext) -> dict[str, str]:
    return _run("idem", ctx)


@tool(effect="read_only")
def peek(ctx: ToolContext) -> dict[str, str]:
    return _run("peek", ctx, write=False)


@tool(effect="read_only")
def broken(ctx: ToolContext) -> None:
    raise ValueError("the tool broke")
