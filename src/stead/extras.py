"""The optional parts of stead, each brought by an extra of the package.

``pip install stead`` brings the command line, the SQLite store, the model
providers, the sandbox and the demo. What only some installs need comes with
an extra named for it, and is imported only where it is used: a command that
needs a part that is not installed says so in one line, with the command that
installs it, instead of a traceback.
"""

from __future__ import annotations

import importlib.util

from .errors import MissingExtra

EXTRAS = {
    "server": "the HTTP API and the web page",
    "postgres": "the PostgreSQL store and blob store",
    "s3": "blobs in S3-compatible object storage",
    "otel": "traces and metrics over OpenTelemetry",
    "mcp": "tools from MCP servers",
    "inflight": "thousands of agents in flight per worker",
    "memory": "fast recall of long-term memories (numpy)",
}
"""Each extra, and what it brings."""


def need(module: str, extra: str, what: str) -> None:
    """Refuse, in one line, ``what`` (a command or a feature) when ``module`` of the
    ``extra`` is not installed."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtra(
            f"{what} needs the {extra!r} extra ({EXTRAS[extra]}), which is not installed: "
            f"pip install 'stead[{extra}]'"
        )
