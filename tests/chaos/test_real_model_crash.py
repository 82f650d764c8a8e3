"""The demo's refactoring task, driven by a provider's model over HTTP, with worker
processes SIGKILLed during a model call and during a tool call.

The model is a fake server of each wire format on 127.0.0.1 that answers with
the demo script's decisions as tool calls, picking the next one from how many
decisions the conversation it is sent already holds (so it is as stateless as a
real model). Everything else is the real ``stead`` command line.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import stead.demo
from stead import Runtime
from stead.integrity.audit import audit

from ..models.fake_servers import FakeServer, Reply
from ..models.test_providers import tool_answer

pytestmark = pytest.mark.chaos
DEMO = Path(stead.demo.__file__).parent
TOOL_NAMES = {"tool"}


def demo_calls() -> list[list[tuple[str, dict[str, Any]]]]:
    """The demo script's decisions, as the tool calls a model would make."""
    calls = []
    for item in yaml.safe_load((DEMO / "script.yaml").read_text()):
        if "tool" in item:
            calls.append([(item["tool"], item.get("args") or {})])
        elif "remember" in item:
            calls.append([("remember", {"values": item["remember"]})])
        elif "complete_goal" in item:
            calls.append([("complete_goal", {"id": item["complete_goal"]})])
        elif "finish" in item:
            calls.append([("finish", {"summary": item["finish"]})])
    return calls


def decisions_in(body: Any) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def run_cli(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as err:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "stead", *args], env=env, stdout=subprocess.DEVNULL, stderr=err
        )


def wait_for(what: Callable[[], bool], seconds: float = 120) -> None:
    """Wait for what a worker visibly does (a bound for a hang: a loaded machine takes
    seconds to start one)."""
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_demo_task_survives_kills_during_a_model_call_and_a_tool_call(
    tmp_path: Path, provider: str
) -> None:
    script = demo_calls()
    slow_once = {"armed": True}
    with FakeServer() as server:

        def respond(body: Any) -> Reply:
            n = decisions_in(body)
            reply = tool_answer(provider, *script[min(n, len(script) - 1)])
            if n == 3 and slow_once["armed"]:  # the model "thinks" while the worker dies
                slow_once["armed"] = False
                reply.delay = 30
            return reply

        server.responder = respond
        spec = yaml.safe_load((DEMO / "spec.yaml").read_text())
        spec["model"] = {"provider": provider, "name": "m-demo", "base_url": server.url}
        spec["workspace"] = str(DEMO / "project")
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
        changelog = tmp_path / "changelog.txt"
        store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--data-dir", str(tmp_path / "d")]
        import os

        env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
        env["STEAD_DEMO_CHANGELOG"] = str(changelog)
        agent = "ag_demo_" + provider
        log = tmp_path / "workers.log"

        # 1. killed while the model is answering its fourth decision
        worker = run_cli(env, log, "run", str(tmp_path / "agent.yaml"), "--id", agent, *store)
        wait_for(lambda: any(decisions_in(s.body) == 3 for s in server.seen))
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)

        # 2. killed while format_code runs (it sleeps once it has written its file)
        slow = {**env, "STEAD_DEMO_SLOW": "1"}
        worker = run_cli(slow, log, "resume", agent, *store)
        report = tmp_path / "d" / "workspaces" / "default" / agent / "shop" / "report.py"
        wait_for(lambda: report.exists() and "compute_total" in report.read_text())
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)

        # 3. a clean resume finishes the task
        worker = run_cli(env, log, "resume", agent, *store)
        assert worker.wait(timeout=120) == 0, log.read_text()

    rt = Runtime(f"sqlite:///{tmp_path / 's.db'}", data_dir=tmp_path / "d")
    state = rt.store.load_state(agent)
    assert state.status == "completed", state.status_reason
    # the changelog was posted exactly once, though two workers died on the way
    assert len(changelog.read_text().splitlines()) == 1
    ws = rt.workspace(agent, "default").root
    assert "compute_total" in (ws / "shop" / "cart.py").read_text()
    assert audit(rt.store, agent).ok
    kinds = [e.kind for e in rt.store.read_events(agent)]
    assert kinds.count("activation_started") == 3
    models = {e.data["model"] for e in rt.store.read_events(agent) if e.kind == "decision"}
    assert models == {f"{provider}:m-demo"}
    rt.close()
