"""Tools for the secrets tests."""

from __future__ import annotations

from stead import ToolContext, tool


@tool(effect="read_only", secrets=["TOKEN"])
def echo_token(ctx: ToolContext) -> dict[str, object]:
    """Leaks its secret on purpose: the runtime must redact it."""
    return {"token": ctx.secrets["TOKEN"], "said": f"the token is {ctx.secrets['TOKEN']}!"}


@tool(effect="read_only", secrets=["TOKEN"])
def fail_with_token(ctx: ToolContext) -> None:
    raise RuntimeError(f"could not log in with {ctx.secrets['TOKEN']}")


@tool(effect="read_only")
def undeclared(ctx: ToolContext) -> dict[str, object]:
    return {"secrets": dict(ctx.secrets)}
