"""Tools for the telemetry tests: one that leaks its secret, one that fails with it."""

from __future__ import annotations

from stead import ToolContext, tool


@tool(effect="read_only", secrets=["TOKEN"])
def leak_token(note: str, ctx: ToolContext) -> dict[str, str]:
    """Returns its secret and its argument: neither may reach a span."""
    return {"token": ctx.secrets["TOKEN"], "note": note}


@tool(effect="effectful", secrets=["TOKEN"])
def deploy(target: str, ctx: ToolContext) -> None:
    """Fails quoting its secret, as a careless tool would."""
    raise RuntimeError(f"could not deploy {target} with token {ctx.secrets['TOKEN']}")
