"""Network grants: a command reaches the network only while the agent holds one.

Real sandboxed processes connect to a server this test starts on 127.0.0.1.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from stead import FakeClock, Kind
from stead.errors import GovernanceError
from stead.sandbox.bwrap import BwrapSandbox
from stead.tools.base import as_tool
from stead.tools.builtin import BUILTINS

from .agents import make_agent, runtime_at


class Server:
    """Counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def server() -> Any:
    s = Server()
    yield s
    s.close()


def connect(port: int) -> dict[str, Any]:
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('connected')"
    return {"tool": "shell", "args": {"command": f'/usr/bin/python3 -c "{code}"'}}


def test_a_command_reaches_the_network_only_under_a_live_grant(
    tmp_path: Path, bwrap: BwrapSandbox, server: Server
) -> None:
    clock = FakeClock()
    rt = runtime_at(tmp_path, clock)
    rt.sandbox = bwrap
    tools = {"shell": as_tool(BUILTINS["shell"])}
    agent = make_agent(
        rt,
        tmp_path,
        [connect(server.port), connect(server.port), connect(server.port), {"finish": "done"}],
        tools=["shell"],
    )
    rt.run(agent, tools=tools, max_steps=1)
    assert server.accepted == 0  # no grant: no network
    granted = rt.grant(agent, {"tool": "network", "valid_for": 60}, reason="fetch deps")
    rt.run(agent, tools=tools, max_steps=1)
    assert server.accepted == 1
    clock.advance(61)  # the grant has lapsed
    state = rt.run(agent, tools=tools).state
    assert server.accepted == 1
    first, second, third = (c["output"] for c in state.recent_calls)
    assert "connected" not in first["stdout"] and first["exit_code"] != 0
    assert "connected" in second["stdout"]
    assert "connected" not in third["stdout"]
    intents = [e for e in rt.store.read_events(agent) if e.kind == Kind.TOOL_INTENT]
    assert [i.data["verdict"].get("network") for i in intents] == [None, granted["id"], None]
    rt.close()


def test_a_network_grant_cannot_pretend_to_limit_hosts_or_uses(tmp_path: Path) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    agent = make_agent(rt, tmp_path, [{"finish": "x"}], tools=["shell"])
    with pytest.raises(GovernanceError, match="cannot limit hosts or uses"):
        rt.grant(agent, {"tool": "network", "args": {"url": {"hosts": ["example.com"]}}})
    with pytest.raises(GovernanceError, match="cannot limit hosts or uses"):
        rt.grant(agent, {"tool": "network", "max_uses": 3})
    rt.close()


def test_a_wildcard_grant_does_not_give_the_network(
    tmp_path: Path, bwrap: BwrapSandbox, server: Server
) -> None:
    rt = runtime_at(tmp_path, FakeClock())
    rt.sandbox = bwrap
    agent = make_agent(rt, tmp_path, [connect(server.port), {"finish": "x"}], scope=[{"tool": "*"}])
    state = rt.run(agent, tools={"shell": as_tool(BUILTINS["shell"])}).state
    assert server.accepted == 0
    assert (
        state.recent_calls[0]["ok"] and "connected" not in state.recent_calls[0]["output"]["stdout"]
    )
    rt.close()
