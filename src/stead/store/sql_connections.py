"""What a SQL backend gives the rows mixed into it beside the journal.

Tokens, webhooks, schedules and long-term memories keep their rows in the same
database as the agents, written with the backend's own connections: one to read
with (``_token_read``) and one inside a transaction (``_tx``). Their SQL is
written once with ``?`` and rendered for the backend's parameter mark
(``_param``: ``?`` or ``%s``) by :meth:`SqlConnections._q`.
"""

from __future__ import annotations

import abc
from contextlib import AbstractContextManager
from typing import Any


class SqlConnections(abc.ABC):
    """A SQL backend's connections and parameter mark (see the module's docstring)."""

    _param: str

    @abc.abstractmethod
    def _token_read(self) -> AbstractContextManager[Any]:
        """A connection to read with."""

    @abc.abstractmethod
    def _tx(self) -> AbstractContextManager[Any]:
        """A connection inside one transaction."""

    def _q(self, text: str) -> str:
        return text.replace("?", self._param)
