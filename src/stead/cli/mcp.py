"""``stead mcp ls SPEC``: a spec's MCP servers, started in the sandbox, and their tools."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from ..spec import load_spec
from ..summaries import shown
from ..tools.mcp.servers import list_server, listing_context
from ..tools.mcp.tools import effect_of, schema_problem, tool_name
from .common import emit_json, out, runtime_for, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("mcp", help="tools from MCP servers")
    verbs = p.add_subparsers(dest="verb", required=True)
    ls = verbs.add_parser(
        "ls",
        parents=[common],
        help="start a spec's MCP servers in the sandbox and list their tools, with the "
        "effect class each gets and where the server's hints disagree with the spec",
    )
    ls.add_argument("spec", help="the agent spec (YAML)")
    ls.add_argument("--network", action="store_true", help="let the servers reach the network")
    ls.set_defaults(func=cmd_mcp_ls)


def cmd_mcp_ls(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    found: list[dict[str, Any]] = []
    with runtime_for(args) as rt, tempfile.TemporaryDirectory(prefix="stead-mcp-") as tmp:
        ctx = listing_context(rt, spec, "mcp-ls", Path(tmp), args.network)
        for server in spec.mcp:
            for tool in list_server(ctx, server):
                effect, source, disagreement = effect_of(server, tool)
                found.append(
                    {
                        "server": server["name"],
                        "name": tool_name(server["name"], str(tool["name"])),
                        "tool": tool["name"],
                        "effect": effect.value,
                        "effect_from": source,
                        "disagreement": disagreement,
                        "unusable": schema_problem(tool),
                        "description": tool.get("description") or "",
                        "inputSchema": tool.get("inputSchema"),
                    }
                )
    if wants_json(args):
        emit_json(found)
        return 0
    if not spec.mcp:
        out.print("the spec lists no MCP servers (an mcp: section)")
    for t in found:
        note = f" [{t['disagreement']}]" if t["disagreement"] else ""
        unusable = f" [not offered: {t['unusable']}]" if t["unusable"] else ""
        # a server's own words: shown with their control characters escaped
        out.print(shown(f"{t['name']}  {t['effect']} (from the {t['effect_from']})"
                        f"{note}{unusable}"), markup=False)  # fmt: skip
        first = t["description"].splitlines()[0] if t["description"] else ""
        out.print(f"    {shown(first)}", markup=False)
        out.print(f"    {json.dumps(t['inputSchema'], sort_keys=True)}", markup=False)
    return 0
