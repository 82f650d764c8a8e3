"""Creating an agent: its id, its first events and grants, its seeded workspace.

Creation is all or nothing: the workspace is seeded in a staging folder and
moved into place only once the agent is stored, and the agent's identity key
and first anchor are stored in the same transaction as its first events
(:func:`stead.integrity.keys.create_keyed`).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from ..errors import NotFound, UsageError
from ..hostpaths import check_seed
from ..ids import check_id, new_id
from ..integrity.keys import create_keyed
from ..journal import Kind, NewEvent
from ..models.registry import check_keys
from ..sandbox.workspace import Workspace
from ..spec import AgentSpec, initial_scope
from ..state import State
from ..store.base import AgentRecord
from ..tools.mcp.servers import listings
from ..values import VERSION
from .authority import new_grant

if TYPE_CHECKING:
    from .runtime import Runtime


def create(rt: Runtime, spec: AgentSpec, agent_id: str | None = None) -> State:
    """Create an agent from a validated spec; seed its workspace; journal it.

    Call :meth:`check_loads` first unless the caller will hand the agent its
    tools itself (``run(tools=...)``): this only checks the id.
    """
    agent_id = new_id("ag", rt.clock) if agent_id is None else check_id(agent_id, "agent id")
    record = AgentRecord(agent_id, spec.tenant, spec.name, spec.to_record(), rt.clock.now())
    check_keys(record.spec, rt.model_key(record))  # its model's key may go to its base_url
    try:
        rt.store.get_record(agent_id)
    except NotFound:
        pass
    else:
        raise UsageError(
            f"an agent with id {agent_id} already exists; choose another id or omit --id"
        )
    # Seed into a staging folder and move it into place only once the agent is
    # stored: a creation killed half-way leaves no agent and no half-seeded
    # workspace under the agent's name (a stored agent whose folder never
    # arrived is rebuilt from its manifest's blobs on first run).
    if spec.workspace:  # before anything is staged: never the data folder or the key
        check_seed(spec.workspace, rt.data_dir)
    ws = rt.workspace(agent_id, spec.tenant)
    staging = Workspace(ws.root.with_name(f".new-{agent_id}"), ws.blobs)
    shutil.rmtree(staging.root, ignore_errors=True)
    try:  # nothing staged is left behind, however creation ends
        staging.create()
        if spec.workspace:
            staging.seed_from(spec.workspace)
        created = NewEvent(
            Kind.AGENT_CREATED,
            {
                "name": spec.name,
                "tenant": spec.tenant,
                "goals": list(spec.goals),
                "autonomy": spec.autonomy,
                "tool_autonomy": dict(spec.tool_autonomy),
                "out_of_scope": spec.out_of_scope,
                "tools": list(spec.tools),
                "model": spec.model,
                "manifest": staging.scan(),
                "seeded_from": spec.workspace,
                "provenance": VERSION,
            },
        )
        author = f"spec author {rt.person()}"
        grants = [
            NewEvent(Kind.GRANT_ADDED, {"grant": new_grant(g, author, rt.clock, "spec scope")})
            for g in initial_scope(spec)
        ]
        # the tools its MCP servers offer, listed now, in its new workspace
        found = listings(rt, spec, agent_id, staging.root)
        listed = [NewEvent(Kind.MCP_TOOLS_LISTED, d) for d in found]
        state = create_keyed(rt, record, [created, *grants, *listed])
    except BaseException:
        shutil.rmtree(staging.root, ignore_errors=True)
        raise
    shutil.rmtree(ws.root, ignore_errors=True)  # an orphan of an earlier, killed creation
    os.replace(staging.root, ws.root)
    return state
