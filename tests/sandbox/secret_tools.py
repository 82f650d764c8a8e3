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


@tool(effect="effectful", secrets=["TOKEN"])
def run_with_token(ctx: ToolContext) -> dict[str, object]:
    """Starts a process the supported way: ctx.run, in the sandbox."""
    result = ctx.run(["/bin/sh", "-c", 'printf %s "$TOKEN" > used.txt; pwd; hostname'])
    return result.to_json()


@tool(effect="idempotent", secrets=["TOKEN"])
def save_token(ctx: ToolContext) -> str:
    """Writes its secret into the workspace, where another tool can read it back."""
    (ctx.workspace / "token.txt").write_text(f"token={ctx.secrets['TOKEN']}\n")
    return "saved"
