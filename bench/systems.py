"""The systems the comparison runs: stead, in this process, and its peers, in ``.venv-peers``.

Each system offers the same workloads (see docs/benchmarks.md):

* ``w1(workdir, steps)``: one agent's durable steps per second;
* ``w2(workdir, agents, steps)``: many agents driven by one process;
* ``build_history(workdir, steps)`` and ``resume(history)``: the time from
  "resume this agent" in a fresh process to its next step completing;
* ``w5``: crash recovery, where a system has it (stead's is a hook in
  :mod:`bench.crash`).

stead runs in this process (its resumes in a fresh one, :mod:`bench._child`);
a peer runs every measurement in a fresh ``.venv-peers/bin/python -m
bench.peers.NAME_peer`` process, which imports and warms up before its clock
starts and prints one JSON object.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import crash, many, resume, steps, workload
from .workload import REPO_ROOT

PEERS_PYTHON = REPO_ROOT / ".venv-peers" / "bin" / "python"
PEER_TIMEOUT_S = 900.0


class PeerError(RuntimeError):
    """A peer's process failed or printed no result."""


@dataclass
class Hist:
    """A history built for workload 3, and how many steps it holds now."""

    system: str
    steps: int
    build_s: float
    db_bytes: int
    handle: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class System:
    name = ""
    label = ""
    max_history: int | None = None
    w5: Callable[[Path, int], dict[str, Any]] | None = None

    def info(self, workdir: Path) -> dict[str, Any]:
        raise NotImplementedError

    def w1(self, workdir: Path, steps: int) -> dict[str, Any]:
        raise NotImplementedError

    def w1_variants(self) -> list[tuple[str, str]]:
        """Extra W1 settings measured for information: (key, label)."""
        return []

    def w1_variant(self, key: str, workdir: Path, steps: int) -> dict[str, Any]:
        raise NotImplementedError

    def w2(self, workdir: Path, agents: int, steps: int) -> dict[str, Any]:
        raise NotImplementedError

    def build_history(self, workdir: Path, steps: int) -> Hist:
        raise NotImplementedError

    def resume(self, hist: Hist) -> dict[str, Any]:
        raise NotImplementedError


class Stead(System):
    name = "stead"
    label = "stead"

    def __init__(self) -> None:
        self.w5 = crash.MEASURE

    def info(self, workdir: Path) -> dict[str, Any]:
        return {
            "system": "stead",
            "default": {"journal_mode": "WAL", "synchronous": "FULL"},
            "used": {"journal_mode": "WAL", "synchronous": "FULL"},
            "w2": many.MEASURE.__name__,
            "w5": self.w5.__name__ if self.w5 else None,
        }

    def w1(self, workdir: Path, n: int) -> dict[str, Any]:
        return steps.measure(workdir, n, "sqlite")

    def w2(self, workdir: Path, agents: int, n: int) -> dict[str, Any]:
        return many.MEASURE(workdir, agents, n)

    def build_history(self, workdir: Path, n: int) -> Hist:
        # an activation_started, then n steps' events, after agent_created
        h = resume.build(workdir, 2 + n * len(workload.STEP_KINDS))
        return Hist("stead", h.decisions, h.build_s, h.db_bytes, h, {"events": h.events})

    def resume(self, hist: Hist) -> dict[str, Any]:
        out = resume.resume_once(hist.handle)
        hist.steps = hist.handle.decisions
        return out


class Peer(System):
    """A peer, run as ``PEERS_PYTHON -m bench.peers.MODULE COMMAND --dir D ...``."""

    module = ""
    variants: tuple[tuple[str, str], ...] = ()

    def __init__(self, python: Path = PEERS_PYTHON, max_history: int | None = None) -> None:
        self.python = python
        self.max_history = max_history

    def call(self, command: str, workdir: Path, **opts: Any) -> dict[str, Any]:
        argv = [
            str(self.python),
            "-m",
            f"bench.peers.{self.module}",
            command,
            "--dir",
            str(workdir),
        ]
        for k, v in opts.items():
            argv += [f"--{k}", str(v)]
        return run_peer(argv, f"{self.name} {command}")

    def info(self, workdir: Path) -> dict[str, Any]:
        return self.call("info", workdir)

    def w1(self, workdir: Path, n: int) -> dict[str, Any]:
        return self.call("w1", workdir, steps=n)

    def w1_variants(self) -> list[tuple[str, str]]:
        return list(self.variants)

    def w1_variant(self, key: str, workdir: Path, n: int) -> dict[str, Any]:
        return self.call("w1", workdir, steps=n, variant=key)

    def w2(self, workdir: Path, agents: int, n: int) -> dict[str, Any]:
        return self.call("w2", workdir, agents=agents, steps=n)

    def build_history(self, workdir: Path, n: int) -> Hist:
        out = self.call("w3-build", workdir, steps=n)
        if out["steps"] != n:
            raise PeerError(f"{self.name} built {out['steps']} steps, wanted {n}")
        return Hist(self.name, n, out["build_s"], out["db_bytes"], workdir, out)

    def resume(self, hist: Hist) -> dict[str, Any]:
        out = self.call("w3-resume", hist.handle, steps=hist.steps)
        hist.steps = out["steps_after"]
        return out


class LangGraph(Peer):
    name = "langgraph"
    label = "LangGraph"
    module = "langgraph_peer"
    variants = (("async", "LangGraph, durability=async (its default)"),)


class Dbos(Peer):
    name = "dbos"
    label = "DBOS"
    module = "dbos_peer"
    variants = (("default", "DBOS, rollback journal (its default)"),)


PEERS: dict[str, type[Peer]] = {"langgraph": LangGraph, "dbos": Dbos}


def run_peer(argv: list[str], what: str) -> dict[str, Any]:
    """Run a peer's measurement in a process of its own; the JSON it printed last."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("VIRTUAL_ENV", None)
    try:
        proc = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=PEER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise PeerError(f"{what} took over {PEER_TIMEOUT_S:.0f}s") from e
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise PeerError(f"{what} failed ({proc.returncode}):\n{tail}")
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise PeerError(f"{what} printed no JSON: {lines[-1][:200]}") from e
    return result
