"""Tools from MCP servers: a client of one server, on stdio or streamable HTTP.

:class:`McpClient` speaks to one server synchronously; a server on stdio is
started through the sandbox (:meth:`stead.sandbox.base.Sandbox.spawn`).
Importing this package does not import the MCP SDK.
"""

from __future__ import annotations

from ...errors import McpServerError
from .client import MAX_MESSAGE_BYTES, MAX_NOISE_BYTES, McpClient

__all__ = ["MAX_MESSAGE_BYTES", "MAX_NOISE_BYTES", "McpClient", "McpServerError"]
