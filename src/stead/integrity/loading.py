"""The code an agent's spec names, imported only once the spec is checked against its seal.

A spec names Python to import on the worker host: tools as ``module:function``
found through its ``base_dir``, and the reconcile hooks of its MCP tools. An
edited ``spec`` column must never get that far (:mod:`stead.integrity.sealing`).
An activation loads them with :func:`spec_tools` right after its acquire has
checked the spec under the agent's lease; anyone else goes through
:func:`sealed_tools`, which checks first.
"""

from __future__ import annotations

from collections.abc import Callable

from ..journal import Kind
from ..sandbox.secrets import Vault
from ..store.base import AgentRecord, Store
from ..tools.base import Tool
from ..tools.mcp.servers import call_server
from ..tools.mcp.tools import journaled_tools
from ..tools.registry import load_tools
from .anchoring import check_record


def spec_tools(store: Store, record: AgentRecord) -> dict[str, Tool]:
    """The spec's tools, and its MCP servers' as journaled (see stead.tools.mcp).

    Imports what the spec names: only for a record already checked.
    """
    tools = load_tools(record.spec.get("tools", []), [record.spec.get("base_dir", ".")])
    if not record.spec.get("mcp"):
        return tools
    listed = store.read_events_of_kinds(record.agent_id, [Kind.MCP_TOOLS_LISTED])
    return tools | journaled_tools(record.spec, [e.data for e in listed], call_server)


def sealed_tools(
    store: Store, record: AgentRecord, vault: Callable[[], Vault] | None
) -> dict[str, Tool]:
    """:func:`spec_tools`, once :func:`~stead.integrity.anchoring.check_record` has
    found the record, the agent's row and its journal to be what its last commit
    sealed (raises :class:`~stead.errors.IntegrityError` otherwise, importing nothing)."""
    check_record(store, record, vault)
    return spec_tools(store, record)
