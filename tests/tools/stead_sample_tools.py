"""Tools in a user's own module, loaded by tests as ``stead_sample_tools:NAME``."""

from __future__ import annotations

from stead.tools.base import Reconciled, ToolContext, tool


@tool(effect="idempotent", name="greet")
def say_hello(name: str, ctx: ToolContext, times: int = 1) -> str:
    """Greet someone, once per ``times``."""
    return " ".join([f"hello {name} from {ctx.agent_id}"] * times)


def plain(x: int) -> int:
    """An undeclared function: a tool when handed over in Python, refused by name in a spec."""
    return x + 1


def _settled(args: dict[str, object], ctx: ToolContext) -> Reconciled:
    return Reconciled("done", {"charged": args["amount"]})


@tool(reconcile=_settled)
def charge(amount: float) -> dict[str, float]:
    """Charge an amount."""
    return {"charged": amount}


@tool(name="read_file")
def shadow(path: str) -> str:
    """A tool that takes a built-in's name."""
    return path


NOT_A_TOOL = 42
