"""``stead demo``: kill a worker mid-step, resume it, and explain what happened.

The demo runs the shop-refactor agent in a separate worker process, kills that
process with SIGKILL while a tool is half-way through rewriting a file, then
resumes the agent here and prints an account a newcomer can follow.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from rich.console import Console

from ..clock import SystemClock
from ..errors import DemoError
from ..ids import new_id
from ..journal import Kind, verify_chain
from ..runtime.runtime import Runtime
from ..server.auth import mint
from ..store.tokens import TokenRows
from .tools import CHANGELOG_ENV, SLOW_ENV

HERE = Path(__file__).parent


def _wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.02)
    raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")


def run_demo(folder: Path, console: Console, store: str | None = None) -> int:
    """Run the demo in ``folder`` (emptied first), on ``store`` if given (any store
    URL, PostgreSQL too: the agent is a new one there), else on a SQLite store of its
    own in the folder."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    url = store or f"sqlite:///{folder / 'stead.db'}"
    changelog = (folder / "changelog.txt").resolve()
    agent_id = new_id("ag", SystemClock())
    env = {**os.environ, SLOW_ENV: "1", CHANGELOG_ENV: str(changelog)}
    os.environ[CHANGELOG_ENV] = str(changelog)

    console.rule("[bold]stead demo[/]: an agent refactoring a project, killed mid-step")
    console.print(
        "The agent renames calc_total to compute_total in a small shop project. "
        "A worker process runs it; we will kill that process with SIGKILL while "
        "a tool is half-way through a step.\n"
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stead",
            "run",
            str(HERE / "spec.yaml"),
            "--id",
            agent_id,
            "--store",
            url,
            "--data-dir",
            str(folder),
            "--json",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    rt = Runtime(url, folder)
    report = folder / "workspaces" / "default" / agent_id / "shop" / "report.py"

    def formatter_is_writing() -> bool:
        if worker.poll() is not None:
            raise DemoError(
                "the worker exited before the crash point: "
                + (worker.stderr.read().decode() if worker.stderr else "")
            )
        return report.exists() and "compute_total" in report.read_text(encoding="utf-8")

    _wait_for(formatter_is_writing, 60, "the worker to reach the formatting step")
    before = rt.store.load_state(agent_id)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    console.print(
        f"[red]killed[/] worker pid {worker.pid} with SIGKILL during step "
        f"{before.decisions} (format_code had rewritten shop/report.py but its "
        "result was not committed).\n"
    )

    console.print("[bold]What was durable at the moment of the crash[/]")
    console.print(
        f"  {before.steps_completed} steps committed, {before.calls_total} tool calls "
        f"with results, memory: {before.memory}"
    )
    for call_id, call in before.pending.items():
        console.print(
            f"  in flight: {call['tool']} {call_id} ({call['effect']}): intent committed, no result"
        )
    console.print(f"  changelog entries outside the workspace: {_lines(changelog)}\n")

    console.print("[bold]Resuming in a new worker[/] …")
    outcome = rt.run(agent_id)
    state = outcome.state
    events = list(rt.store.read_events(agent_id))
    if outcome.restored:
        console.print(
            f"  workspace rolled back to the last committed manifest: {', '.join(outcome.restored)}"
        )
    for ev in events:
        if ev.kind == Kind.TOOL_RESULT and ev.data.get("rerun"):
            console.print(
                f"  {ev.data['tool']} is idempotent: re-run once with the same "
                f"idempotency key ({ev.data['call_id']})"
            )
    executions = Counter(ev.data["call_id"] for ev in events if ev.kind == Kind.TOOL_INTENT)
    repeated = [c for c, n in executions.items() if n > 1]
    console.print(
        f"  effects not repeated: {len(executions)} intents journaled, "
        f"{len(repeated)} journaled twice; changelog has {_lines(changelog)} "
        "entry (posted before the crash, never again)"
    )
    console.print(
        f"  {state.decisions} decisions for {state.steps_completed} steps: step "
        f"{before.decisions}'s decision was read back from the journal, the model "
        "was not asked again\n"
    )

    chain = verify_chain(events)
    console.print("[bold]Final state[/]")
    console.print(f"  status: [green]{state.status}[/] — {state.status_reason}")
    for g in state.goals:
        console.print(f"  goal {g['id']}: {g['status']}")
    console.print(f"  workspace: {', '.join(sorted(state.manifest))}")
    grep = [ev for ev in events if ev.kind == Kind.TOOL_RESULT and ev.data["tool"] == "shell"]
    if grep:
        console.print(f"  check: {grep[-1].data['output']['stdout'].strip()}")
    verdict = "[green]verified[/]" if chain.ok else f"[red]BROKEN at event {chain.bad_seq}[/]"
    console.print(f"  audit chain: {verdict}, {chain.events} events, head {chain.head_hash[:16]}…")
    shown = redacted_url(url)  # a PostgreSQL URL's password is not printed
    console.print(f"\nExplore it: stead trace {agent_id} --store {shown} --data-dir {folder}",
                  markup=False)  # fmt: skip
    if isinstance(rt.store, TokenRows):  # a viewer's token, so the page opens at once
        token, _ = mint(rt.store, state.tenant, "viewer", "demo viewer", SystemClock())
        console.print(
            f"Watch it in the web page: stead serve --store {shown} --data-dir {folder}\n"
            f"  then open http://127.0.0.1:8750/agents/{agent_id} and log in with the token\n"
            f"  {token}",
            markup=False,
        )
    rt.close()
    ok = state.status == "completed" and chain.ok and not repeated and _lines(changelog) == 1
    return 0 if ok else 1


def redacted_url(url: str) -> str:
    """``url`` with any password in it written as ``***``."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0
