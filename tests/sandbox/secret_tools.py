"""Tools for the secrets tests."""

from __future__ import annotations

import base64
from urllib.parse import quote

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


@tool(effect="read_only", secrets=["TOKEN"])
def leak_shapes(ctx: ToolContext) -> dict[str, object]:
    """Leaks its secret in the shapes a value commonly travels in."""
    t = ctx.secrets["TOKEN"]
    raw = t.encode()
    return {
        "base64": base64.b64encode(raw).decode(),
        "unpadded": base64.urlsafe_b64encode(b"x" + raw).decode().rstrip("="),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "reversed": t[::-1],
        "upper": t.upper(),
        "url": quote(t, safe=""),
        "prefix": f"token starts {t[: len(t) // 2]}…",
    }


@tool(effect="read_only", secrets=["TOKEN"])
def leak_split(part: int, ctx: ToolContext) -> dict[str, object]:
    """Part 0: the secret cut across stdout and stderr; parts 1 and 2: its two halves."""
    t = ctx.secrets["TOKEN"]
    if part == 0:
        return {"stdout": f"out {t[:3]}", "stderr": f"{t[3:]} err", "exit_code": 0}
    half = len(t) // 2
    return {"stdout": t[:half] if part == 1 else t[half:]}
