"""The status a person is shown: the journal's, told truthfully.

An agent's journal says ``running`` from the moment it has work (a new agent
once started, an approval given, a message received) until it waits or ends.
Whether anything runs it is another matter: a worker holding its lease. An
agent with work that no worker holds is shown ``queued``, so that a person
never reads "running" with nothing behind it (a server started with
``--workers 0`` and no ``stead work``, or every worker stopped). The journal is
not changed: ``queued`` is how it is shown, not a status an agent is in.
"""

from __future__ import annotations

from .base import Store

QUEUED = "queued"
"""Shown for an agent whose journal says ``running`` while no worker holds it."""


def shown_status(store: Store, agent_id: str, status: str, now: float) -> str:
    """``status`` as a person should read it (see the module's docstring)."""
    if status != "running":
        return status
    lease = store.get_lease(agent_id)
    return status if lease is not None and lease.live(now) else QUEUED


QUEUED_REASON = "it has work, but no worker runs it: start `stead work` or `stead serve`"
"""Why an agent is ``queued``, for the views that give a reason."""
